"""The sink-probe exception hierarchy.

Every error raised on purpose derives from :class:`SinkProbeError`, itself a
:class:`llmcore.errors.LLMCoreError`, so the ``sink-probe`` command line prints it as a usage error
(exit status 2). Each class also derives from the builtin a caller expects.
"""

from __future__ import annotations

from llmcore.errors import LLMCoreError


class SinkProbeError(LLMCoreError):
    """Base class of every sink-probe error."""


class SinkProbeConfigError(SinkProbeError, ValueError):
    """A bad parameter: eps, tau_ratio, T, sink indices, conflicting intervention options."""


class SinkProbeInputError(SinkProbeError, ValueError):
    """Bad data: texts too short, non-finite attention or hidden states, a moving sink set."""


class AttentionMapsUnavailable(SinkProbeError, RuntimeError):
    """Attention maps were requested from a model whose attention kernel does not return them."""


class UnsupportedArchitecture(SinkProbeError, NotImplementedError):
    """A model whose attention modules this package cannot reach or patch."""
