"""Exception hierarchy of monica-syco: catch :class:`MonicaError` for every deliberate error."""

from __future__ import annotations

from llmcore.errors import LLMCoreError


class MonicaError(LLMCoreError):
    """Base class of every error monica-syco raises on purpose."""


class MonicaConfigError(MonicaError, ValueError):
    """An invalid setting: layers, threshold, gap, alphas, window, step length, mode."""


class MonicaDataError(MonicaError, ValueError):
    """Bad items or step data: missing fields, one class only, NaN states, unknown cue types."""


class NotFittedError(MonicaError, RuntimeError):
    """A probe or monitor was used before :meth:`fit`."""


class MismatchError(MonicaError, ValueError):
    """A monitor/calibrator was fitted on another model (hidden size or fingerprint differ)."""
