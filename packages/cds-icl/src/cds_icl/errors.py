"""Errors of ``cds_icl``: one hierarchy rooted in :class:`llmcore.errors.LLMCoreError`."""

from __future__ import annotations

from llmcore.errors import LLMCoreError


class CDSError(LLMCoreError):
    """Base class of every error this package raises on purpose."""


class CDSInputError(CDSError, ValueError):
    """A bad argument or input file (k out of range, duplicate ids, unknown choice, ...)."""


class ContextLengthError(CDSInputError):
    """A prompt does not fit in the model's context window."""


class OfflineEncoderError(CDSError, RuntimeError):
    """An embedding backend needs a network model that cannot be reached offline."""


def unknown_choice(kind: str, value: object, choices: list[str] | tuple[str, ...]) -> CDSInputError:
    """The error for an unknown strategy / selector / backend, listing the valid ones."""
    return CDSInputError(f"unknown {kind} {value!r}; choose one of: {', '.join(choices)}")
