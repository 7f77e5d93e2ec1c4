"""Errors of edit-collapse; all subclass :class:`llmcore.errors.LLMCoreError` (the CLI prints
them as one line and exits with status 2)."""

from __future__ import annotations

from llmcore.errors import LLMCoreError


class EditCollapseError(LLMCoreError):
    """Base class of this package's errors."""


class EditInputError(EditCollapseError, ValueError):
    """A bad edit request, data file, layer, template or argument."""


class EditDivergedError(EditCollapseError):
    """An update had non-finite entries (ill-conditioned statistics or an exploding v*)."""


class StaleStatsError(EditCollapseError):
    """Cached covariance statistics belong to another model, dtype, layer or sample count."""


class UnsupportedModelError(EditCollapseError):
    """Encoder-decoder, quantised or frozen targets that the editors cannot change."""


class JudgeUnavailableError(EditCollapseError):
    """``matcher='judge'`` without a reachable judge model."""


class TargetNotReachedWarning(UserWarning):
    """A v*/z* search ended without reaching its target (the edit may not land)."""
