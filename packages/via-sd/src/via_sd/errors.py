"""The via-sd exception hierarchy: every error this package raises derives from ViaSDError,
which derives from :class:`llmcore.errors.LLMCoreError` (so one ``except LLMCoreError`` catches
the errors of every package built on llmcore, and the CLI reports them as usage errors).

Each class also derives from the builtin a caller would expect (``ValueError``, ``TypeError``,
``NotImplementedError``, ``FloatingPointError``), so ``except ValueError`` keeps working.
"""

from __future__ import annotations

from llmcore.errors import LLMCoreError


class ViaSDError(LLMCoreError):
    """Base class of every via-sd error."""


class ViaSDConfigError(ViaSDError, ValueError):
    """A bad configuration value (thresholds, lengths, sampling knobs, masks)."""


class ViaSDInputError(ViaSDError, ValueError):
    """Bad inputs: empty prompt, mismatched drafter/target, bad files."""


class ViaSDTypeError(ViaSDError, TypeError):
    """An argument of the wrong type."""


class UnsupportedModelError(ViaSDError, NotImplementedError):
    """A model or mode v1 does not support (encoder-decoder, batch > 1, no cache crop)."""


class NonFiniteLogitsError(ViaSDError, FloatingPointError):
    """A model produced NaN or inf logits."""
