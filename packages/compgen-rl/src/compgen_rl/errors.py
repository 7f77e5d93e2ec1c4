"""The compgen-rl exception hierarchy.

Every error raised on purpose derives from :class:`CompgenError`, an
:class:`llmcore.errors.LLMCoreError`, so the ``compgen-rl`` command line prints it as a usage
error (exit status 2). Each class also derives from the builtin a caller expects.
"""

from __future__ import annotations

from llmcore.errors import LLMCoreError


class CompgenError(LLMCoreError, ValueError):
    """A bad value: program, inventory, split, training or evaluation setting."""


class UnknownModuleError(CompgenError, KeyError):
    """A skill, routing, module code or inventory name that is not registered."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class InfeasibleSplitError(CompgenError):
    """A split that cannot be built: too few signatures, or coverage impossible."""


class SplitCheckError(CompgenError):
    """A split that violates disjointness or coverage (:func:`compgen_rl.data.check_splits`)."""
