"""Configuration dataclasses: quantisers, rotations, ``compare`` and ``bench`` runs.

Defaults follow SpinQuant's protocol (W4A4, per-channel symmetric weights with an MSE clip
search, per-token asymmetric activations, KV16) and ReSpinQuant's rank r = 32.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from respin_quant.errors import RespinConfigError

METHODS = ("none", "rtn", "quarot", "spinquant", "respin")


def _bits(name: str, v: int) -> None:
    if not isinstance(v, int) or isinstance(v, bool) or not 2 <= v <= 16:
        raise RespinConfigError(
            f"{name}={v!r} is out of range: use an integer in 2..16 (16 = no quantisation)"
        )


@dataclass
class QuantConfig:
    """Simulated quantisation settings (weights, activations on linear inputs, KV cache)."""

    w_bits: int = field(default=4, metadata={"help": "weight bits (16 = FP weights)"})
    a_bits: int = field(default=4, metadata={"help": "activation bits on linear inputs (16 = FP)"})
    k_bits: int = field(default=16, metadata={"help": "K-cache bits (16 = FP)"})
    v_bits: int = field(default=16, metadata={"help": "V-cache bits (16 = FP)"})
    w_groupsize: int = field(default=-1, metadata={"help": "weight group size (-1 = per channel)"})
    a_groupsize: int = field(
        default=-1, metadata={"help": "activation group size (-1 = per token)"}
    )
    kv_groupsize: int = field(default=128, metadata={"help": "KV group size (capped at head dim)"})
    w_sym: bool = field(default=True, metadata={"help": "symmetric weight quantisation"})
    a_sym: bool = field(default=False, metadata={"help": "symmetric activation quantisation"})
    kv_sym: bool = field(default=False, metadata={"help": "symmetric KV quantisation"})
    w_clip: Literal["mse", "none"] = field(
        default="mse",
        metadata={"help": "weight clip search: 'mse' (ratios 1.0..w_clip_min) or 'none'"},
    )
    w_clip_min: float = field(
        default=0.8, metadata={"help": "smallest clip ratio of the MSE search"}
    )
    w_clip_grid: int = field(default=100, metadata={"help": "number of clip ratios searched"})
    a_clip_ratio: float = field(default=1.0, metadata={"help": "activation clip ratio in (0, 1]"})
    weight_quantizer: Literal["rtn", "gptq"] = field(
        default="rtn", metadata={"help": "'rtn' (round to nearest) or 'gptq'"}
    )
    gptq_nsamples: int = field(default=128, metadata={"help": "GPTQ calibration sequences"})
    gptq_percdamp: float = field(
        default=0.01, metadata={"help": "GPTQ damping (fraction of mean diag)"}
    )
    gptq_blocksize: int = field(default=128, metadata={"help": "GPTQ column block size"})
    gptq_act_order: bool = field(default=False, metadata={"help": "GPTQ activation ordering"})
    quantize_lm_head: bool = field(default=False, metadata={"help": "also quantise lm_head"})

    def __post_init__(self) -> None:
        for n in ("w_bits", "a_bits", "k_bits", "v_bits"):
            _bits(n, getattr(self, n))
        for n in ("w_groupsize", "a_groupsize", "kv_groupsize"):
            v = getattr(self, n)
            if not isinstance(v, int) or (v != -1 and v < 1):
                raise RespinConfigError(f"{n}={v!r}: use -1 (whole row) or a positive group size")
        if not 0.0 < float(self.a_clip_ratio) <= 1.0:
            raise RespinConfigError(f"a_clip_ratio={self.a_clip_ratio!r} must lie in (0, 1]")
        if not 0.0 < float(self.w_clip_min) <= 1.0:
            raise RespinConfigError(f"w_clip_min={self.w_clip_min!r} must lie in (0, 1]")
        if self.w_clip not in ("mse", "none"):
            raise RespinConfigError(f"w_clip={self.w_clip!r}: use 'mse' or 'none'")
        if self.weight_quantizer not in ("rtn", "gptq"):
            raise RespinConfigError(
                f"weight_quantizer={self.weight_quantizer!r}: use 'rtn' or 'gptq'"
            )
        if not self.w_sym:
            raise RespinConfigError(
                "w_sym=False: asymmetric weight quantisation is not implemented; weights use "
                "the symmetric per-channel grid of SpinQuant/QuaRot (w_sym=True)"
            )
        if self.w_clip_grid < 1:
            raise RespinConfigError(f"w_clip_grid={self.w_clip_grid!r} must be >= 1")
        if self.gptq_nsamples < 1 or self.gptq_blocksize < 1:
            raise RespinConfigError("gptq_nsamples and gptq_blocksize must be >= 1")
        if not 0.0 <= self.gptq_percdamp < 1.0:
            raise RespinConfigError(f"gptq_percdamp={self.gptq_percdamp!r} must lie in [0, 1)")

    @property
    def label(self) -> str:
        kv = "" if self.k_bits == 16 and self.v_bits == 16 else f"KV{min(self.k_bits, self.v_bits)}"
        return f"W{self.w_bits}A{self.a_bits}{kv}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RotationConfig:
    """Rotation method and its learning protocol (Cayley SGD on the Stiefel manifold)."""

    method: Literal["none", "quarot", "spinquant", "respin"] = field(
        default="respin",
        metadata={"help": "none | quarot (random Hadamard) | spinquant (learned global) | respin"},
    )
    residual_rank: int | Literal["full"] = field(
        default=32, metadata={"help": "rank r of the residual subspace rotation, or 'full'"}
    )
    rebase: bool = field(
        default=False,
        metadata={"help": "re-define bases so the FP function is exact (not in paper)"},
    )
    rotation_seed: int = field(default=0, metadata={"help": "seed of the shared random Hadamard"})
    center_embeddings: bool = field(
        default=False, metadata={"help": "subtract embedding row means (changes RMSNorm models)"}
    )
    online_had_down: bool = field(
        default=True, metadata={"help": "online Hadamard before down_proj"}
    )
    online_had_qk: bool | None = field(
        default=None, metadata={"help": "Hadamard on Q/K after RoPE (None: when k_bits < 16)"}
    )
    online_dense: bool = field(
        default=False,
        metadata={"help": "use a dense random orthogonal matrix when a size is not a power of two"},
    )
    online_block: bool = field(
        default=False,
        metadata={
            "help": "non-power-of-two online sizes: Hadamard on the largest power-of-two block "
            "(package option, not in the paper)"
        },
    )
    steps: int = field(default=100, metadata={"help": "Cayley SGD steps"})
    lr: float = field(default=1.5, metadata={"help": "Cayley SGD learning rate"})
    batch_size: int = field(default=8, metadata={"help": "calibration sequences per step"})
    calib_nsamples: int = field(default=800, metadata={"help": "calibration sequences"})
    calib_seqlen: int = field(default=2048, metadata={"help": "calibration sequence length"})
    lr_schedule: Literal["cosine", "constant"] = field(
        default="cosine", metadata={"help": "learning-rate schedule"}
    )
    train_w_bits: int | None = field(
        default=None, metadata={"help": "weight bits while learning (None: 16 if gptq else w_bits)"}
    )
    seed: int = field(default=0, metadata={"help": "seed of the calibration batch order"})

    def __post_init__(self) -> None:
        if self.method not in ("none", "quarot", "spinquant", "respin"):
            raise RespinConfigError(
                f"method={self.method!r}: use one of none, quarot, spinquant, respin"
            )
        r = self.residual_rank
        if not (r == "full" or (isinstance(r, int) and not isinstance(r, bool) and r >= 0)):
            raise RespinConfigError(f"residual_rank={r!r}: use an integer >= 0 or 'full'")
        if (
            self.steps < 0
            or self.batch_size < 1
            or self.calib_nsamples < 1
            or self.calib_seqlen < 2
        ):
            raise RespinConfigError(
                "steps must be >= 0 and batch_size, calib_nsamples >= 1, calib_seqlen >= 2"
            )
        if self.lr <= 0:
            raise RespinConfigError(f"lr={self.lr!r} must be > 0")
        if self.lr_schedule not in ("cosine", "constant"):
            raise RespinConfigError(f"lr_schedule={self.lr_schedule!r}: use cosine or constant")
        if self.train_w_bits is not None:
            _bits("train_w_bits", self.train_w_bits)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_rank(value: str | int) -> int | Literal["full"]:
    """'full' or a non-negative integer (for CLI flags)."""
    if isinstance(value, int):
        return value
    if value.strip().lower() == "full":
        return "full"
    try:
        return int(value)
    except ValueError:
        raise RespinConfigError(f"residual rank {value!r}: use an integer >= 0 or 'full'") from None


@dataclass
class BenchConfig:
    """What ``respin-quant bench`` runs (CPU-safe defaults; the README table uses them)."""

    settings: str = field(
        default="4:4:50,3:3:20", metadata={"help": "w:a:S triples (S = outlier scale)"}
    )
    steps: int = field(default=100, metadata={"help": "Cayley steps for SpinQuant and ReSpin"})
    lr: float = field(
        default=1.5, metadata={"help": "Cayley learning rate (SpinQuant's; as the claim test)"}
    )
    batch_size: int = field(default=16, metadata={"help": "calibration sequences per step"})
    w_clip_grid: int = field(default=9, metadata={"help": "weight clip ratios searched"})
    w_clip_min: float = field(default=0.6, metadata={"help": "smallest weight clip ratio"})
    rank: int = field(default=32, metadata={"help": "ReSpin residual rank r"})
    rotation_seed: int = field(default=11, metadata={"help": "seed of the shared Hadamard"})
    throughput: bool = field(
        default=True, metadata={"help": "also measure online-overhead tokens/s"}
    )
    thr_hidden: int = field(default=1024, metadata={"help": "throughput model hidden size"})
    thr_layers: int = field(default=8, metadata={"help": "throughput model layers"})
    thr_seq: int = field(default=256, metadata={"help": "throughput sequence length"})
    thr_intermediate: int = field(
        default=4096, metadata={"help": "throughput model FFN size (power of two: fast H_down)"}
    )
    thr_repeats: int = field(default=9, metadata={"help": "timed forwards per variant"})
    threads: int = field(default=1, metadata={"help": "torch threads"})


COMPARE_METHODS = ("rtn", "quarot", "spinquant", "respin")


@dataclass
class CompareConfig:
    """What one ``compare`` run evaluates (quantiser, methods, ranks, rotation learning)."""

    methods: str = field(
        default="rtn,quarot,spinquant,respin", metadata={"help": "comma-separated methods"}
    )
    ranks: str = field(default="0,8,32,full", metadata={"help": "ReSpin residual ranks"})
    w_bits: int = field(default=4, metadata={"help": "weight bits"})
    a_bits: int = field(default=4, metadata={"help": "activation bits"})
    kv_bits: int = field(default=16, metadata={"help": "KV-cache bits"})
    weight_quantizer: str = field(default="rtn", metadata={"help": "rtn or gptq"})
    w_clip_grid: int = field(default=100, metadata={"help": "weight clip ratios searched"})
    w_clip_min: float = field(default=0.8, metadata={"help": "smallest weight clip ratio"})
    steps: int = field(default=100, metadata={"help": "Cayley steps (SpinQuant, ReSpin)"})
    lr: float = field(default=1.5, metadata={"help": "Cayley learning rate"})
    batch_size: int = field(default=8, metadata={"help": "calibration sequences per step"})
    rotation_seed: int = field(default=0, metadata={"help": "seed of the shared Hadamard"})
    online_dense: bool = field(default=False, metadata={"help": "dense non-pow2 H_down"})
    online_block: bool = field(default=False, metadata={"help": "block non-pow2 H_down"})

    def __post_init__(self) -> None:
        bad = [m for m in self.method_list() if m not in COMPARE_METHODS]
        if bad or not self.method_list():
            raise RespinConfigError(
                f"methods={self.methods!r}: use a comma-separated subset of {', '.join(COMPARE_METHODS)}"
            )
        self.rank_list()  # validates
        QuantConfig(**self.quant_kwargs())  # validates bits, quantiser

    def method_list(self) -> list[str]:
        return [m.strip() for m in self.methods.split(",") if m.strip()]

    def rank_list(self) -> list[int | str]:
        ranks = [parse_rank(r) for r in self.ranks.split(",") if r.strip()]
        if any(isinstance(r, int) and r < 0 for r in ranks):
            raise RespinConfigError(f"ranks={self.ranks!r}: ranks must be >= 0 or 'full'")
        return ranks

    def quant_kwargs(self) -> dict[str, Any]:
        return {
            "w_bits": self.w_bits,
            "a_bits": self.a_bits,
            "k_bits": self.kv_bits,
            "v_bits": self.kv_bits,
            "weight_quantizer": self.weight_quantizer,
            "w_clip_grid": self.w_clip_grid,
            "w_clip_min": self.w_clip_min,
        }
