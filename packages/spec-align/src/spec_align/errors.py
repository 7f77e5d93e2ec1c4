"""Exception hierarchy of spec-align: every deliberate error derives from :class:`SpecAlignError`."""

from __future__ import annotations


class SpecAlignError(Exception):
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
