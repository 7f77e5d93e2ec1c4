"""Configs of paft-dist: PAFTConfig (the sync), FaultSpec (emulated corruption), ExperimentConfig.

Dataclasses with CPU-safe defaults; every field carries `help` metadata so llmcore.config can turn
them into flags and YAML. Validation raises PAFTConfigError / FaultSpecError naming the value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from paft_dist.errors import FaultSpecError, PAFTConfigError

MODES = ("ddp", "sync", "dyn", "averager")
DYN_POLICIES = ("snr", "snr_raw", "budget")
STATE_POLICIES = ("none", "momentum", "all")
REDUCES = ("mean", "median", "majority")
NONFINITE = ("exclude", "raise", "ignore")
TRIGGERS = ("schedule", "checksum", "both")
FAULT_KINDS = ("none", "gaussian", "bitflip", "scale", "zero")
FAULT_WHERE = ("pre_step", "comm_hook")


def _choice(name: str, value: Any, allowed: tuple[str, ...], err: type = PAFTConfigError) -> None:
    if value not in allowed:
        raise err(f"{name}={value!r} is not one of {', '.join(allowed)}")


@dataclass
class PAFTConfig:
    """PAFT-Sync / PAFT-Dyn settings (paper Alg. 1 and 2, plus the repairs of this package)."""

    mode: str = field(
        default="dyn",
        metadata={"help": "ddp (no sync) | sync (PAFT-Sync, every H) | dyn (PAFT-Dyn)"},
    )
    sync_every: int = field(default=10, metadata={"help": "H for sync; initial H_old for dyn"})
    h_min: int = field(default=1, metadata={"help": "smallest period PAFT-Dyn may choose"})
    h_max: int = field(default=100, metadata={"help": "largest period PAFT-Dyn may choose"})
    dyn_policy: str = field(
        default="snr", metadata={"help": "snr | snr_raw (literal paper formula) | budget"}
    )
    snr_scale: float = field(default=1.0, metadata={"help": "kappa in H = kappa*mean(|g|/s)"})
    budget_rel: float = field(default=1e-3, metadata={"help": "rho of the budget policy"})
    overlap: bool | None = field(
        default=None,
        metadata={"help": "overlap the sync with the next step (default: on for dyn, off else)"},
    )
    sync_optimizer_state: str = field(
        default="all", metadata={"help": "none | momentum (first moments) | all (every moment)"}
    )
    state_sync_every: int = field(
        default=1, metadata={"help": "sync optimizer state every k-th parameter sync"}
    )
    reduce: str = field(default="mean", metadata={"help": "mean (paper) | median | majority"})
    nonfinite: str = field(
        default="exclude", metadata={"help": "exclude | raise | ignore non-finite replicas"}
    )
    verify_sync: bool = field(
        default=False, metadata={"help": "fingerprint after each sync; re-broadcast on mismatch"}
    )
    trigger: str = field(
        default="schedule", metadata={"help": "schedule | checksum (per-step grad hash) | both"}
    )
    process_group: Any = field(default=None, metadata={"help": "torch process group (None: WORLD)"})
    log_path: str | None = field(default=None, metadata={"help": "JSONL file for sync events"})

    def __post_init__(self) -> None:
        _choice("mode", self.mode, MODES)
        _choice("dyn_policy", self.dyn_policy, DYN_POLICIES)
        _choice("sync_optimizer_state", self.sync_optimizer_state, STATE_POLICIES)
        _choice("reduce", self.reduce, REDUCES)
        _choice("nonfinite", self.nonfinite, NONFINITE)
        _choice("trigger", self.trigger, TRIGGERS)
        for name in ("sync_every", "h_min", "h_max", "state_sync_every"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise PAFTConfigError(f"{name}={v!r} must be an integer >= 1")
        if self.h_min > self.h_max:
            raise PAFTConfigError(f"h_min={self.h_min} > h_max={self.h_max}; choose h_min <= h_max")
        if self.snr_scale <= 0 or self.budget_rel <= 0:
            raise PAFTConfigError(
                f"snr_scale={self.snr_scale} and budget_rel={self.budget_rel} must be > 0"
            )

    @property
    def use_overlap(self) -> bool:
        return self.mode == "dyn" if self.overlap is None else bool(self.overlap)


def parse_ranks(value: str | list[int] | tuple[int, ...] | None) -> str | list[int]:
    """'all' | '0,2' | [0, 2] -> 'all' or a sorted list of ints."""
    if value is None or value == "all":
        return "all"
    if isinstance(value, str):
        try:
            return sorted({int(x) for x in value.split(",") if x.strip()})
        except ValueError:
            raise FaultSpecError(f"ranks={value!r}: use 'all' or comma-separated ints") from None
    return sorted({int(x) for x in value})


def parse_bits(value: str | int | list[int] | tuple[int, ...]) -> list[int]:
    """'23-30' | '30' | '23,30' | [30] -> list of bit positions."""
    if isinstance(value, int):
        return [value]
    if isinstance(value, str):
        out: list[int] = []
        try:
            for part in value.split(","):
                if "-" in part:
                    a, b = part.split("-")
                    out.extend(range(int(a), int(b) + 1))
                elif part.strip():
                    out.append(int(part))
        except ValueError:
            raise FaultSpecError(f"bits={value!r}: use e.g. '23-30' or '30' or '23,30'") from None
        return out
    return [int(b) for b in value]


@dataclass
class FaultSpec:
    """One kind of emulated silent data corruption of the received gradient."""

    kind: str = field(default="gaussian", metadata={"help": "none|gaussian|bitflip|scale|zero"})
    sigma: float = field(default=0.1, metadata={"help": "gaussian: std of the added noise"})
    fraction: float = field(default=1.0, metadata={"help": "fraction of elements corrupted"})
    bits: Any = field(default="23-30", metadata={"help": "bitflip: candidate bit positions"})
    num_elements: int | None = field(
        default=None, metadata={"help": "bitflip/zero/scale: elements per event (None: fraction)"}
    )
    factor: float = field(default=-20.0, metadata={"help": "scale: multiply the gradient by"})
    prob: float = field(default=1.0, metadata={"help": "probability of an event per step"})
    every: int = field(default=1, metadata={"help": "consider every k-th step only"})
    start_step: int = field(default=0, metadata={"help": "first step (0-based) that may fault"})
    end_step: int | None = field(default=None, metadata={"help": "last step (exclusive)"})
    burst: tuple[int, float] | None = field(
        default=None, metadata={"help": "(every_k, sigma_large): extra large gaussian burst"}
    )
    ranks: Any = field(default="all", metadata={"help": "'all' or list of target ranks"})
    where: str = field(default="pre_step", metadata={"help": "pre_step | comm_hook"})
    seed: int = field(default=0, metadata={"help": "seed of every draw"})

    def __post_init__(self) -> None:
        _choice("kind", self.kind, FAULT_KINDS, FaultSpecError)
        _choice("where", self.where, FAULT_WHERE, FaultSpecError)
        self.ranks = parse_ranks(self.ranks)
        self.bits = parse_bits(self.bits)
        if not (self.sigma >= 0):
            raise FaultSpecError(f"sigma={self.sigma} must be >= 0 (it is a standard deviation)")
        if not (0.0 <= self.prob <= 1.0):
            raise FaultSpecError(f"prob={self.prob} must lie in [0, 1]")
        if not (0.0 < self.fraction <= 1.0):
            raise FaultSpecError(f"fraction={self.fraction} must lie in (0, 1]")
        if self.every < 1:
            raise FaultSpecError(f"every={self.every} must be >= 1")
        if self.num_elements is not None and self.num_elements < 1:
            raise FaultSpecError(f"num_elements={self.num_elements} must be >= 1 or None")
        if self.kind == "bitflip" and not self.bits:
            raise FaultSpecError("bitflip needs at least one bit position in `bits`")
        if any(b < 0 for b in self.bits):
            raise FaultSpecError(f"bits={self.bits} must be non-negative bit positions")
        if self.burst is not None:
            k, s = self.burst
            if int(k) < 1 or float(s) < 0:
                raise FaultSpecError(f"burst={self.burst}: need (every_k >= 1, sigma_large >= 0)")
            self.burst = (int(k), float(s))

    @classmethod
    def from_variance(cls, variance: float, **kw: Any) -> FaultSpec:
        """Gaussian noise with per-element variance sigma^2 (the paper quotes variances)."""
        if variance < 0:
            raise FaultSpecError(f"variance={variance} must be >= 0")
        return cls(kind="gaussian", sigma=variance**0.5, **kw)


@dataclass
class ExperimentConfig:
    """One data-parallel training run of the small trainer (`run_experiment`)."""

    model: str = field(default="mlp", metadata={"help": "mlp | tiny-lm | HF causal-LM id/path"})
    optimizer: str = field(default="sgd", metadata={"help": "sgd | momentum | adam | adamw"})
    lr: float = field(default=0.05, metadata={"help": "learning rate (constant)"})
    momentum: float = field(default=0.9, metadata={"help": "momentum of the 'momentum' optimizer"})
    weight_decay: float = field(default=0.0, metadata={"help": "weight decay"})
    steps: int = field(default=600, metadata={"help": "optimizer steps"})
    batch_size: int = field(default=32, metadata={"help": "per-rank batch size"})
    world_size: int = field(default=2, metadata={"help": "processes (ranks)"})
    backend: str = field(default="gloo", metadata={"help": "gloo | nccl"})
    paft: PAFTConfig = field(default_factory=lambda: PAFTConfig(mode="ddp"))
    faults: list[FaultSpec] = field(default_factory=list)
    grad_clip: float | None = field(default=None, metadata={"help": "clip grad norm (baseline)"})
    seed: int = field(default=0, metadata={"help": "seed (init, data, faults)"})
    eval_every: int = field(default=50, metadata={"help": "divergence measured every k steps"})
    bucket_cap_mb: float | None = field(default=None, metadata={"help": "DDP bucket size"})
    checkpoint_every: int | None = field(default=None, metadata={"help": "checkpoint period"})
    stop_after: int | None = field(default=None, metadata={"help": "stop (simulated crash)"})
    seq_len: int = field(default=64, metadata={"help": "tiny-lm/HF: sequence length"})
    timeout_s: float = field(default=120.0, metadata={"help": "collective timeout per process"})
    threads: int = field(default=1, metadata={"help": "torch threads per rank"})
    save_params: bool = field(default=False, metadata={"help": "write final flat params per rank"})

    def __post_init__(self) -> None:
        if self.optimizer not in ("sgd", "momentum", "adam", "adamw"):
            raise PAFTConfigError(
                f"optimizer={self.optimizer!r} is not one of sgd, momentum, adam, adamw"
            )
        _choice("backend", self.backend, ("gloo", "nccl"))
        if self.world_size < 1:
            raise PAFTConfigError(f"world_size={self.world_size} must be >= 1")
        if self.world_size < 2 and self.paft.mode != "ddp":
            raise PAFTConfigError(
                f"mode={self.paft.mode!r} needs world_size >= 2 (got {self.world_size}): "
                "there are no replicas to synchronise"
            )
        if self.steps < 1 or self.batch_size < 1 or self.eval_every < 1:
            raise PAFTConfigError(
                f"steps={self.steps}, batch_size={self.batch_size}, eval_every={self.eval_every} "
                "must all be >= 1"
            )
        if self.lr <= 0:
            raise PAFTConfigError(f"lr={self.lr} must be > 0")
        for f in self.faults:
            if f.ranks != "all" and any(r < 0 or r >= self.world_size for r in f.ranks):
                raise FaultSpecError(
                    f"fault ranks {f.ranks} outside [0, {self.world_size}); "
                    f"use ranks between 0 and {self.world_size - 1} or 'all'"
                )
