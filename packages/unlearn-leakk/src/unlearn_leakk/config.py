"""Configs: decoding, unlearning and RULE (reconstructed)."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

from unlearn_leakk.errors import LeakConfigError

#: k values of the official aggregation (``K_VALUES`` in ``whole_eval.py``).
K_DEFAULT: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)
#: (temperature, top_p) pairs of the official evaluation entry point; (0, 0) = greedy.
OFFICIAL_PAIRS: tuple[tuple[float, float], ...] = (
    (0.0, 0.0),
    (0.2, 0.2),
    (0.2, 0.8),
    (0.2, 1.0),
    (0.8, 0.2),
    (0.8, 0.8),
    (0.8, 1.0),
    (1.0, 0.2),
    (1.0, 0.8),
    (1.0, 1.0),
)
METHOD_NAMES: tuple[str, ...] = ("GradAscent", "GradDiff", "NPO", "SimNPO", "RMU")


def _num(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _posint(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


@dataclass
class DecodingConfig:
    """How forget queries are sampled. ``temperature == 0`` is greedy (top-p is then
    ignored, as in the official ``(0, 0)`` pair)."""

    temperature: float = field(default=1.0, metadata={"help": "0 = greedy; else > 0"})
    top_p: float = field(default=1.0, metadata={"help": "nucleus mass in (0, 1]"})
    top_k: int | None = field(default=None, metadata={"help": "top-k filter (None = off)"})
    n: int = field(default=200, metadata={"help": "samples per query"})
    max_new_tokens: int = field(default=200, metadata={"help": "tokens per sample"})
    seed: int = field(default=42, metadata={"help": "sampling seed (item i uses seed + i)"})
    batch_size: int = field(default=32, metadata={"help": "samples per generate call"})
    stop: tuple[str, ...] | None = field(
        default=None, metadata={"help": "stop strings (None: the dataset's own)"}
    )

    def __post_init__(self) -> None:
        if not _num(self.temperature) or self.temperature < 0:
            raise LeakConfigError(
                f"temperature={self.temperature!r} is invalid: use 0 (greedy) or a float > 0"
            )
        if not self.is_greedy and (not _num(self.top_p) or not 0.0 < self.top_p <= 1.0):
            raise LeakConfigError(f"top_p={self.top_p!r} is invalid: use a float in (0, 1]")
        if self.top_k is not None and not _posint(self.top_k):
            raise LeakConfigError(f"top_k={self.top_k!r} is invalid: use None or an int >= 1")
        for name in ("n", "max_new_tokens", "batch_size"):
            if not _posint(getattr(self, name)):
                raise LeakConfigError(f"{name}={getattr(self, name)!r} is invalid: use an int >= 1")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise LeakConfigError(f"seed={self.seed!r} is invalid: use an int >= 0")
        if self.stop is not None:
            if isinstance(self.stop, str) or not all(isinstance(s, str) and s for s in self.stop):
                raise LeakConfigError(f"stop={self.stop!r} is invalid: use a list of strings")
            self.stop = tuple(self.stop)
        if self.is_greedy and self.n > 1:
            warnings.warn(
                f"temperature=0 (greedy) with n={self.n}: all samples are identical; "
                "leak@k then equals leak@1",
                stacklevel=3,
            )

    @property
    def is_greedy(self) -> bool:
        return self.temperature == 0

    @property
    def tag(self) -> str:
        """Directory name of the official layout: ``temperature={T}top_p={p}``."""
        return f"temperature={self.temperature:g}top_p={self.top_p:g}"


@dataclass
class GreedyForgetStop:
    """Stop unlearning once greedy decoding says "forgotten" (the practice the paper
    criticises): greedy forget accuracy (exact phrase) <= ``max_forget_acc``, checked every
    ``eval_every_steps`` optimizer steps."""

    max_forget_acc: float = 0.1
    eval_every_steps: int = 1
    max_new_tokens: int = 16

    def __post_init__(self) -> None:
        if not _num(self.max_forget_acc) or not 0 <= self.max_forget_acc <= 1:
            raise LeakConfigError(f"max_forget_acc={self.max_forget_acc!r} must be in [0, 1]")
        if not _posint(self.eval_every_steps):
            raise LeakConfigError(f"eval_every_steps={self.eval_every_steps!r} must be >= 1")


@dataclass
class UnlearnConfig:
    """One unlearning run, open-unlearning argument names:
    ``L = gamma * L_forget + alpha * L_retain``."""

    method: str = field(default="GradDiff", metadata={"help": f"one of {METHOD_NAMES}"})
    lr: float = field(default=1e-5, metadata={"help": "AdamW learning rate"})
    epochs: float = field(default=10.0, metadata={"help": "epochs over the forget set"})
    batch_size: int = field(default=4, metadata={"help": "forget items per micro-batch"})
    grad_accum: int = field(default=4, metadata={"help": "gradient accumulation steps"})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay"})
    warmup_epochs: float = field(default=1.0, metadata={"help": "linear warm-up (epochs)"})
    gamma: float = field(default=1.0, metadata={"help": "forget-loss weight"})
    alpha: float = field(default=1.0, metadata={"help": "retain-loss weight"})
    beta: float | None = field(
        default=None, metadata={"help": "NPO/SimNPO inverse temperature (None: 0.5 / 4.5)"}
    )
    delta: float = field(default=0.0, metadata={"help": "SimNPO margin"})
    retain_loss_type: str = field(default="NLL", metadata={"help": "NLL or KL (to pi_ref)"})
    steering_coeff: float = field(default=2.0, metadata={"help": "RMU steering coefficient c"})
    rmu_layer: int = field(default=7, metadata={"help": "RMU decoder layer index"})
    peft_config: Any = field(
        default=None,
        metadata={
            "help": "LoRA unlearning: a peft config, or a mapping of peft.LoraConfig fields "
            "(extra unlearn-leakk[peft])"
        },
    )
    early_stop: GreedyForgetStop | None = field(
        default=None, metadata={"help": "stop when greedy says forgotten"}
    )
    max_steps: int | None = field(default=None, metadata={"help": "cap on optimizer steps"})
    max_length: int = field(default=256, metadata={"help": "tokens per (question+answer)"})
    seed: int = field(default=0, metadata={"help": "data order / init seed"})
    threads: int | None = field(default=None, metadata={"help": "torch threads (CPU)"})

    def __post_init__(self) -> None:
        from unlearn_leakk.trainers import METHODS

        if self.method not in METHODS:
            raise LeakConfigError(
                f"unknown unlearning method {self.method!r}; valid: {', '.join(METHODS)}"
            )
        if not _num(self.lr) or self.lr <= 0:
            raise LeakConfigError(f"lr={self.lr!r} must be > 0")
        if not _num(self.epochs) or self.epochs <= 0:
            raise LeakConfigError(f"epochs={self.epochs!r} must be > 0")
        for name in ("batch_size", "grad_accum", "max_length"):
            if not _posint(getattr(self, name)):
                raise LeakConfigError(f"{name}={getattr(self, name)!r} must be an int >= 1")
        if self.max_steps is not None and not _posint(self.max_steps):
            raise LeakConfigError(f"max_steps={self.max_steps!r} must be None or >= 1")
        if self.retain_loss_type not in ("NLL", "KL"):
            raise LeakConfigError(f"retain_loss_type={self.retain_loss_type!r}; use 'NLL' or 'KL'")
        if self.beta is None:
            self.beta = {"NPO": 0.5, "SimNPO": 4.5}.get(self.method, 0.5)
        if not _num(self.beta) or self.beta <= 0:
            raise LeakConfigError(f"beta={self.beta!r} must be > 0")
        if self.rmu_layer < 0:
            raise LeakConfigError(f"rmu_layer={self.rmu_layer} must be >= 0")


@dataclass
class RULEConfig:
    """RULE, reconstructed: rounds of on-policy mining of leaking samples, which
    join the forget set of the base method."""

    base: UnlearnConfig = field(default_factory=UnlearnConfig)
    rounds: int = field(default=3, metadata={"help": "mining rounds R"})
    n_mine: int = field(default=32, metadata={"help": "samples mined per forget query"})
    mine_decoding: DecodingConfig | None = field(
        default=None, metadata={"help": "attack decoding (default T = p = 1, n = n_mine)"}
    )
    judge: str = field(default="exact", metadata={"help": "mining judge: exact, rouge, es"})
    judge_threshold: float = field(default=0.5, metadata={"help": "threshold for rouge"})
    epochs_per_round: float = field(default=2.0, metadata={"help": "base epochs per round"})
    weighting: str = field(
        default="uniform", metadata={"help": "uniform, leakk, or count (sample multiplicity)"}
    )
    k_target: int = field(default=128, metadata={"help": "k in the leakk weights"})
    entropy_weight: float = field(default=0.0, metadata={"help": "NPO+ENT term (experimental)"})
    stop_when_clean: bool = field(default=True, metadata={"help": "stop when nothing leaks"})
    include_original_question: bool = field(
        default=True, metadata={"help": "also mine meta['question'] variants when present"}
    )

    def __post_init__(self) -> None:
        if not _posint(self.rounds):
            raise LeakConfigError(f"RULE rounds={self.rounds!r} must be an int >= 1")
        if not _posint(self.n_mine):
            raise LeakConfigError(f"RULE n_mine={self.n_mine!r} must be an int >= 1")
        if self.weighting not in ("uniform", "leakk", "count"):
            raise LeakConfigError(
                f"weighting={self.weighting!r}; use 'uniform', 'leakk' or 'count'"
            )
        if not _posint(self.k_target):
            raise LeakConfigError(f"k_target={self.k_target!r} must be >= 1")
        if not _num(self.epochs_per_round) or self.epochs_per_round <= 0:
            raise LeakConfigError(f"epochs_per_round={self.epochs_per_round!r} must be > 0")
        if self.mine_decoding is None:
            self.mine_decoding = DecodingConfig(1.0, 1.0, n=self.n_mine)
        elif self.mine_decoding.n != self.n_mine:
            raise LeakConfigError(
                f"mine_decoding.n={self.mine_decoding.n} differs from n_mine={self.n_mine}"
            )
