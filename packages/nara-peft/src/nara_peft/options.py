"""Settings of ``nara-peft train`` and ``nara-peft bench`` as dataclasses (torch-free, so the
CLI builds its flags from them without importing torch). Each field is a flag, and
``--config FILE`` (YAML, JSON or TOML) sets any of them; a typed flag beats the file."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from nara_peft.errors import NaraConfigError


def _h(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass
class TrainConfig:
    """``nara-peft train`` settings (reference values in the help; CPU-safe defaults)."""

    model: str = field(default="", metadata=_h("Hub id or local path of a masked diffusion LM."))
    data: str = field(default="", metadata=_h("JSONL training file."))
    out: str = field(default="nara-out", metadata=_h("Output directory (adapter + train_log)."))
    method: Literal["nara", "lora", "nara-constant"] = field(
        default="nara", metadata=_h("Adapter to train.")
    )
    r: int = field(default=32, metadata=_h("Rank (reference 32)."))
    c_scale: float = field(default=0.1, metadata=_h("eta of C = I + eta F (reference 0.1)."))
    target_modules: list[str] | None = field(default=None, metadata=_h("Modules to adapt."))
    lora_dropout: float = field(default=0.05, metadata=_h("Adapter dropout (reference 0.05)."))
    lr: float = field(default=1e-4, metadata=_h("Peak learning rate."))
    epochs: int = field(default=1, metadata=_h("Epochs."))
    max_length: int = field(default=512, metadata=_h("Pad/truncate length (longer rows skipped)."))
    batch_size: int = field(default=1, metadata=_h("Micro-batch size."))
    grad_accum: int = field(default=32, metadata=_h("Gradient accumulation steps."))
    mask_token_id: int | None = field(default=None, metadata=_h("Mask id (else tokenizer's)."))
    stage_1: float = field(default=0.0, metadata=_h("Fraction of updates with C = I."))
    seed: int = field(default=0, metadata=_h("Seed of masking and init."))
    max_steps: int | None = field(default=None, metadata=_h("Stop after this many updates."))
    device: str | None = field(default=None, metadata=_h("cpu / cuda / auto."))
    dtype: str | None = field(default=None, metadata=_h("Model dtype (fp32 on CPU)."))

    def __post_init__(self) -> None:
        if self.method not in ("nara", "lora", "nara-constant"):
            raise NaraConfigError(
                f"method={self.method!r}; choose 'nara', 'lora' or 'nara-constant'"
            )
        if self.r < 1:
            raise NaraConfigError(f"r must be >= 1, got {self.r}")
        if self.grad_accum < 1 or self.batch_size < 1 or self.epochs < 1:
            raise NaraConfigError("batch_size, grad_accum and epochs must be >= 1")


@dataclass
class BenchConfig:
    """``nara-peft bench`` settings (CPU-safe defaults)."""

    seeds: tuple[int, ...] = field(default=(0,), metadata=_h("Fine-tuning seeds."))
    steps: int = field(default=400, metadata=_h("Fine-tuning steps per arm."))
    eval_n: int = field(default=2000, metadata=_h("Held-out sequences per noise level."))
    timing_reps: int = field(default=10, metadata=_h("Timed repetitions (best of)."))
    midsize: bool = field(default=True, metadata=_h("Also time the mid-size config."))

    def __post_init__(self) -> None:
        self.seeds = tuple(self.seeds)
        if not self.seeds:
            raise NaraConfigError("seeds must name at least one seed")
        if min(self.steps, self.eval_n, self.timing_reps) < 1:
            raise NaraConfigError(
                f"steps, eval_n and timing_reps must be >= 1, got {self.steps}, {self.eval_n}, "
                f"{self.timing_reps}"
            )
