"""Exception hierarchy of spec-align: every deliberate error derives from :class:`SpecAlignError`,
itself an :class:`llmcore.errors.LLMCoreError`, so one ``except LLMCoreError`` (and the CLI's
error policy) catches the errors of every package built on llmcore."""

from __future__ import annotations

from llmcore.errors import LLMCoreError


class SpecAlignError(LLMCoreError):
    """Base class of every error spec-align raises on purpose."""


class SpecFormatError(SpecAlignError, ValueError):
    """``specifications.json`` is malformed (names the file and the offending index)."""


class DataFormatError(SpecAlignError, ValueError):
    """``prompts.json`` / ``generate.json`` / ``rules.json`` is malformed (names file and item)."""


class BackendCapabilityError(SpecAlignError):
    """A backend cannot do what a method needs (e.g. an assistant prefill without chat template)."""


class SpecBackendError(SpecAlignError):
    """A model call failed after its bounded retries (names the URL / status)."""


class JudgeParseError(SpecAlignError, ValueError):
    """A judge reply could not be parsed into one verdict per specification."""

    def __init__(self, message: str, raw: str = "") -> None:
        super().__init__(message)
        self.raw = raw


class RuleMissingError(SpecAlignError, ValueError):
    """The rule-based judge was asked to judge a specification that has no machine rule."""


class SpecConfigError(SpecAlignError, ValueError):
    """An option has an invalid value (names the option, the value and the valid choices)."""
