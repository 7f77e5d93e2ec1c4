"""Exception hierarchy of unlearn-leakk: catch :class:`LeakKError` for every deliberate error."""

from __future__ import annotations

from llmcore.errors import LLMCoreError


class LeakKError(LLMCoreError):
    """Base class of every error unlearn-leakk raises on purpose."""


class LeakConfigError(LeakKError, ValueError):
    """An invalid setting (k, n, temperature, top-p, method, rounds, ...)."""


class LeakDataError(LeakKError, ValueError):
    """Bad items or files: missing fields, empty answers, duplicate ids, unknown splits."""


class JudgeUnavailableError(LeakKError):
    """A judge's model or API cannot be used here (offline, missing extra, missing key)."""


class UnlearnError(LeakKError):
    """An unlearning run cannot proceed as configured."""
