"""Exception hierarchy of nara-peft (all rooted in :class:`NaraError`, itself an
:class:`llmcore.errors.LLMCoreError`, so one ``except LLMCoreError`` catches every package's
errors and the CLI prints them as one line)."""

from __future__ import annotations

from llmcore.errors import LLMCoreError


class NaraError(LLMCoreError):
    """Base class of every error raised by nara-peft."""


class NaraConfigError(NaraError, ValueError):
    """An invalid NaRA configuration or argument (also a ``ValueError`` for PEFT-style callers)."""


class NaraNoiseLevelError(NaraError, ValueError):
    """The noise level lambda is missing, malformed, or reached a layer outside a forward pass."""


class NaraMergeError(NaraError, RuntimeError):
    """Merging a noise-dependent update into the base weight without a fixed noise level."""


class NaraDataError(NaraError, ValueError):
    """Bad training/evaluation data (empty answers, prompts longer than the sequence, ...)."""


class NaraVersionError(NaraError, ImportError):
    """The installed peft lacks the tuner hooks NaRA needs."""
