"""The pfa-learnability exception hierarchy.

Every error derives from :class:`PFALearnabilityError` (itself an
:class:`llmcore.errors.LLMCoreError`, so CLIs report it as a usage error) and from the builtin a
caller would expect (``ValueError``/``RuntimeError``).
"""

from __future__ import annotations

from llmcore.errors import LLMCoreError


class PFALearnabilityError(LLMCoreError):
    """Base class of every pfa-learnability error."""


class PFAValidationError(PFALearnabilityError, ValueError):
    """A malformed automaton: negative or non-normalised weights, unknown states or symbols."""


class NonTightAutomatonError(PFAValidationError):
    """An automaton whose string mass is below one (EOS unreachable from some reachable SCC)."""


class PropertyError(PFALearnabilityError, ValueError):
    """A property that matches no arc, has a negative increment, or cannot be parsed."""


class BinError(PFALearnabilityError, ValueError):
    """A bad bin request: ``B < 1``, a bin with zero mass, a tilt out of reach."""


class MaxLengthError(PFALearnabilityError, RuntimeError):
    """The sampler reached ``max_length`` (the automaton is close to non-tight)."""


class VocabularyError(PFALearnabilityError, ValueError):
    """A tokenizer that does not map every PFA symbol and EOS to exactly one token."""
