"""Error classes of d3llm: every one is an :class:`llmcore.errors.LLMCoreError`."""

from __future__ import annotations

from llmcore.errors import ConfigError, LLMCoreError


class D3LLMError(LLMCoreError):
    """Base class of d3llm's errors."""


class D3LLMConfigError(D3LLMError, ConfigError):
    """A bad argument or configuration value (also a ``ValueError``)."""


class NotBidirectionalError(D3LLMError, RuntimeError):
    """The wrapped model does not attend bidirectionally (a later token cannot change an
    earlier position's logits)."""


class NFECapError(D3LLMError, RuntimeError):
    """A decoder hit its safety cap on forward passes; ``partial`` is the unfinished result."""

    def __init__(self, message: str, partial: object) -> None:
        super().__init__(message)
        self.partial = partial


class TrajectoryAlignmentError(D3LLMError, ValueError):
    """A trajectory record cannot be aligned with its training example."""
