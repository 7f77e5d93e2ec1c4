"""Exception hierarchy of paft-dist: every error raised on purpose derives from PAFTError."""

from __future__ import annotations


class PAFTError(Exception):
    """Base class of every error paft-dist raises on purpose."""


class PAFTConfigError(PAFTError, ValueError):
    """A configuration value is invalid (names the field, the value and what is allowed)."""


class FaultSpecError(PAFTConfigError):
    """A fault-injection spec is invalid (spec §2.7, §8)."""


class UnsupportedOptimizerError(PAFTError, TypeError):
    """The optimizer's state cannot be averaged across replicas (spec §2.5, §8)."""


class ReplicaMismatchError(PAFTError, RuntimeError):
    """Replicas disagree on parameter shapes, dtypes or order (checked once at attach)."""


class ReplicaCorruptionError(PAFTError, RuntimeError):
    """A sync found non-finite replicas it may not use (spec §2.6 `nonfinite`)."""

    def __init__(self, ranks: list[int], step: int, what: str = "non-finite parameters") -> None:
        super().__init__(
            f"{what} on rank(s) {ranks} at step {step}; with nonfinite='exclude' healthy ranks are "
            "averaged, but no healthy rank is left (or nonfinite='raise'). Restart from a checkpoint."
        )
        self.ranks = ranks
        self.step = step


class DistributedSetupError(PAFTError, RuntimeError):
    """torch.distributed is not set up the way the requested mode needs."""
