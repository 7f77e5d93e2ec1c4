"""Exception hierarchy of paft-dist: every error raised on purpose derives from PAFTError.

PAFTError derives from llmcore's LLMCoreError, so one ``except LLMCoreError`` (and the shared
CLI error policy) covers this package too.
"""

from __future__ import annotations

from llmcore.errors import LLMCoreError


class PAFTError(LLMCoreError):
    """Base class of every error paft-dist raises on purpose."""


class PAFTConfigError(PAFTError, ValueError):
    """A configuration value is invalid (names the field, the value and what is allowed)."""


class FaultSpecError(PAFTConfigError):
    """A fault-injection spec is invalid (kind, rate, bit positions, target ranks)."""


class UnsupportedOptimizerError(PAFTError, TypeError):
    """The optimizer's state cannot be averaged across replicas (names the state key)."""


class ReplicaMismatchError(PAFTError, RuntimeError):
    """Replicas disagree on parameter shapes, dtypes or order (checked once at attach)."""


class ReplicaCorruptionError(PAFTError, RuntimeError):
    """A sync found non-finite replicas it may not use (`PAFTConfig.nonfinite`)."""

    def __init__(self, ranks: list[int], step: int, what: str = "non-finite parameters") -> None:
        super().__init__(
            f"{what} on rank(s) {ranks} at step {step}; with nonfinite='exclude' healthy ranks are "
            "averaged, but no healthy rank is left (or nonfinite='raise'). Restart from a checkpoint."
        )
        self.ranks = ranks
        self.step = step


class DistributedSetupError(PAFTError, RuntimeError):
    """torch.distributed is not set up the way the requested mode needs."""


class CheckpointError(PAFTError, ValueError):
    """A checkpoint cannot be written or is not a valid paft-dist checkpoint (never unpickled)."""
