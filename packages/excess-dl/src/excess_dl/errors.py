"""Errors of excess-dl: one hierarchy rooted in :class:`llmcore.errors.LLMCoreError`."""

from __future__ import annotations

from llmcore.errors import LLMCoreError


class EDLError(LLMCoreError):
    """Base class of every error excess-dl raises on purpose."""


class EDLConfigError(EDLError, ValueError):
    """An :class:`~excess_dl.config.EDLConfig` value is invalid (names the field and the fix)."""


class EDLInputError(EDLError, ValueError):
    """Training or test data are unusable (names the example index and the fix)."""


class NumericalError(EDLError, FloatingPointError):
    """A loss became NaN or infinite while coding or fitting (names n and the method)."""
