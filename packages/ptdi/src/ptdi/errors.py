"""The ptdi exception hierarchy.

Every error this package raises on purpose derives from :class:`PTDIError`, itself a
:class:`llmcore.errors.LLMCoreError`, so the ``ptdi`` command line reports it as a usage error
(``ptdi: error: ...``, exit status 2) instead of a traceback. Each class also derives from the
builtin a caller would expect (``ValueError``, ``NotImplementedError``).
"""

from __future__ import annotations

from llmcore.errors import LLMCoreError


class PTDIError(LLMCoreError):
    """Base class of every ptdi error."""


class PTDIConfigError(PTDIError, ValueError):
    """A bad parameter: alpha, lambda, gamma, z, k, split ratios, estimator names."""


class PTDIInputError(PTDIError, ValueError):
    """Bad data: non-finite scores, too small a calibration set, leaked or mislabelled rows,
    missing score columns or orientation metadata, texts too short to score."""


class UnsupportedBackendError(PTDIError, NotImplementedError):
    """A score the chosen backend cannot compute (Min-K%++ needs full-vocabulary statistics)."""
