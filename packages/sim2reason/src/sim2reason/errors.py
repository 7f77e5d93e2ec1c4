"""The sim2reason exception hierarchy.

Every error raised on purpose derives from :class:`Sim2ReasonError`, itself a
:class:`llmcore.errors.LLMCoreError`, so the ``sim2reason`` command line reports it as a usage
error (``sim2reason: error: ...``, exit status 2) instead of a traceback. Each class also derives
from the builtin a caller would expect.
"""

from __future__ import annotations

from llmcore.errors import LLMCoreError


class Sim2ReasonError(LLMCoreError):
    """Base class of every sim2reason error."""


class SceneError(Sim2ReasonError, ValueError):
    """A scene that fails the DSL schema (the message names the field and the bad value)."""


class UnsupportedFamilyError(Sim2ReasonError, NotImplementedError):
    """An engine asked to simulate a scene family it does not implement."""


class SimulationError(Sim2ReasonError, RuntimeError):
    """A simulation that went unstable (NaN/Inf, step budget exceeded)."""


class QAError(Sim2ReasonError, ValueError):
    """A QA pair or data set that cannot be built or exported as asked."""


class ConfigError(Sim2ReasonError, ValueError):
    """A bad option value (preset, tolerance, child budget...)."""
