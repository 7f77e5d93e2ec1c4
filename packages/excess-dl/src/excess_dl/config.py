"""Configuration of an excess-description-length run (learner, fine-tuning method, schedule)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from itertools import pairwise
from typing import Any, Literal

from excess_dl.errors import EDLConfigError

#: Voita & Titov (2020) online-code block boundaries, as fractions of n.
VOITA_TITOV_FRACTIONS: tuple[float, ...] = (
    0.001,
    0.002,
    0.004,
    0.008,
    0.016,
    0.032,
    0.0625,
    0.125,
    0.25,
    0.5,
    1.0,
)

Mode = Literal["online", "single_pass", "blockwise"]
Method = Literal["full", "lora", "random_params", "prompt"]


def _default_lora() -> dict[str, Any]:
    return {"r": 8, "alpha": None, "target_modules": "all-linear", "dropout": 0.0}


@dataclass
class EDLConfig:
    """How EDL is estimated: the learner A (mode, optimiser, schedule) and what it may train.

    EDL_A(D) = MDL_A(D) - n * L(theta_n) depends on the learner, so every field here is part of
    the reported number.
    """

    mode: Mode = "online"
    """Learner: ``online`` (code each example, then R replay steps), ``single_pass`` (first-epoch
    loss, batch coded before its update) or ``blockwise`` (Voita-Titov blocks, fit from the base
    on every prefix)."""
    checkpoints: list[int] | None = None
    """n at which the test loss is evaluated; ``None`` = powers of two <= n, plus n."""
    block_fractions: list[float] = field(default_factory=lambda: list(VOITA_TITOV_FRACTIONS))
    """Blockwise boundaries as fractions of n (strictly increasing in (0, 1], ending at 1.0)."""
    block_sizes: list[int] | None = None
    """Blockwise boundaries t_1 < ... < t_S = n as example counts (overrides the fractions)."""
    first_block: Literal["base", "uniform"] = "base"
    """Code of block 0: the base model, or log2|V| bits per token (models trained from scratch)."""
    method: Method = "full"
    """Trainable parameters: all, a LoRA adapter, k random scalars, or none (``prompt``)."""
    lora: dict[str, Any] = field(default_factory=_default_lora)
    """LoRA options: ``r``, ``alpha`` (None = 2r), ``target_modules``, ``dropout``."""
    random_params_k: int = 100
    """Number of trainable scalar entries for ``random_params``."""
    optimizer: Literal["adamw"] = "adamw"
    """Optimiser (AdamW, betas (0.9, 0.999))."""
    lr: float | None = None
    """Learning rate; ``None`` = 1e-3 for ``full``, 1e-2 for ``lora`` and ``random_params``."""
    lr_schedule: Literal["constant", "inverse_sqrt"] = "constant"
    """``inverse_sqrt``: lr * sqrt(lr_decay_start / max(step, lr_decay_start))."""
    lr_decay_start: int = 10
    """Optimizer step where the inverse-square-root decay starts."""
    replay_steps: int = 2
    """R: optimizer steps after coding each example (online)."""
    batch_size: int = 16
    """B (online replay batch), b (single-pass batch and blockwise fit batch)."""
    fit_epochs: int = 5
    """Blockwise fit: steps = clip(fit_epochs * ceil(t / b), fit_min_steps, fit_max_steps)."""
    fit_min_steps: int = 5
    fit_max_steps: int = 150
    weight_decay: float = 0.0
    max_grad_norm: float | None = None
    """Gradient clipping; ``None`` = none."""
    seed: int = 0
    test_size: int = 300
    """Test examples used (the first ``test_size``)."""
    format_control: bool = False
    """Also run the learner on label-shuffled training data and attach that control curve."""
    scoring_backend: Literal["hf", "vllm"] = "hf"
    """Backend for the test loss: in-process HF model, or vLLM prompt log-probs (GPU)."""
    accuracy: bool = True
    """Greedy exact match of the completion tokens on the test set at every checkpoint."""
    eval_forward: bool = True
    """Single-pass: code each batch with a separate eval-mode forward (``False`` reuses the
    training loss, exact only without dropout)."""
    loss_ref: float = 0.0
    """L_ref of the loss-gap closed G(n), bits per example (0 for deterministic tasks)."""
    allow_overlap: bool = False
    """Accept more than 1 % exact train/test duplicates (finite-support tasks)."""
    add_eos: bool = False
    """Append the tokenizer's EOS to every completion."""
    add_bos: bool | None = None
    """Put the tokenizer's BOS before each prompt (``None``: when it has one, as
    :func:`llmcore.metrics.completion_logprobs`; ``False`` matches TRL's tokenisation)."""
    coding_batch_size: int = 16
    """Batch size of the no-grad scoring forwards."""
    device: str | None = None
    """Device of the fits; ``None`` = the model's device."""

    def __post_init__(self) -> None:
        if self.mode not in ("online", "single_pass", "blockwise"):
            raise EDLConfigError(
                f"mode={self.mode!r} is invalid: use 'online', 'single_pass' or 'blockwise'"
            )
        if self.method not in ("full", "lora", "random_params", "prompt"):
            raise EDLConfigError(
                f"method={self.method!r} is invalid: use 'full', 'lora', 'random_params' or 'prompt'"
            )
        if self.lr_schedule not in ("constant", "inverse_sqrt"):
            raise EDLConfigError(f"lr_schedule={self.lr_schedule!r}: use constant or inverse_sqrt")
        if self.first_block not in ("base", "uniform"):
            raise EDLConfigError(f"first_block={self.first_block!r}: use 'base' or 'uniform'")
        if self.scoring_backend not in ("hf", "vllm"):
            raise EDLConfigError(f"scoring_backend={self.scoring_backend!r}: use 'hf' or 'vllm'")
        for name in ("replay_steps", "batch_size", "fit_epochs", "fit_min_steps", "test_size"):
            if int(getattr(self, name)) < 1:
                raise EDLConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.fit_max_steps < self.fit_min_steps:
            raise EDLConfigError(
                f"fit_max_steps={self.fit_max_steps} < fit_min_steps={self.fit_min_steps}"
            )
        if self.lr is not None and not self.lr > 0:
            raise EDLConfigError(f"lr must be > 0 (or None for the default), got {self.lr}")
        if self.random_params_k < 1:
            raise EDLConfigError(f"random_params_k must be >= 1, got {self.random_params_k}")
        fr = [float(f) for f in self.block_fractions]
        if (
            not fr
            or any(not 0.0 < f <= 1.0 for f in fr)
            or any(b <= a for a, b in pairwise(fr))
            or fr[-1] != 1.0
        ):
            raise EDLConfigError(
                f"block_fractions={self.block_fractions} must be strictly increasing in (0, 1] "
                "and end at 1.0, e.g. 0.25,0.5,1.0"
            )
        self.block_fractions = fr
        if self.checkpoints is not None:
            _strictly_increasing_positive(self.checkpoints, "checkpoints")
        if self.block_sizes is not None:
            _strictly_increasing_positive(self.block_sizes, "block_sizes")
        lora = {**_default_lora(), **(self.lora or {})}
        unknown = set(lora) - set(_default_lora())
        if unknown:
            raise EDLConfigError(
                f"unknown lora option(s) {sorted(unknown)}; known: r, alpha, target_modules, "
                "dropout"
            )
        if int(lora["r"]) < 1:
            raise EDLConfigError(f"lora r must be >= 1, got {lora['r']}")
        self.lora = lora

    @property
    def effective_lr(self) -> float:
        """The learning rate used: ``lr`` or the method's default."""
        if self.lr is not None:
            return float(self.lr)
        return 1e-3 if self.method in ("full", "prompt") else 1e-2

    def label(self) -> str:
        """A short method label, e.g. ``full``, ``lora:r=1:targets=v_proj``, ``random-params:k=100``."""
        if self.method == "lora":
            t = self.lora["target_modules"]
            t = ",".join(t) if isinstance(t, list | tuple) else t
            return f"lora:r={self.lora['r']}:targets={t}"
        if self.method == "random_params":
            return f"random-params:k={self.random_params_k}"
        return self.method

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _strictly_increasing_positive(values: list[int], name: str) -> None:
    if not values or any(int(v) < 1 for v in values):
        raise EDLConfigError(f"{name}={values} must be a non-empty list of positive integers")
    if any(b <= a for a, b in pairwise(values)):
        raise EDLConfigError(f"{name}={values} must be strictly increasing")


def parse_method_spec(spec: str, base: EDLConfig | None = None) -> EDLConfig:
    """``full``, ``prompt``, ``lora:r=1:targets=v_proj``, ``random-params:k=100`` -> EDLConfig."""
    base = base or EDLConfig()
    parts = spec.strip().split(":")
    name = parts[0].replace("-", "_")
    kw: dict[str, str] = {}
    for p in parts[1:]:
        if "=" not in p:
            raise EDLConfigError(f"method spec {spec!r}: option {p!r} must look like key=value")
        k, v = p.split("=", 1)
        kw[k.strip()] = v.strip()
    d = asdict(base)
    d["method"] = name
    if name == "lora":
        lora = dict(d["lora"])
        for k, v in kw.items():
            if k == "r":
                lora["r"] = int(v)
            elif k in ("alpha", "lora_alpha"):
                lora["alpha"] = float(v)
            elif k in ("targets", "target_modules"):
                lora["target_modules"] = v if v == "all-linear" else v.split(",")
            elif k == "dropout":
                lora["dropout"] = float(v)
            else:
                raise EDLConfigError(f"method spec {spec!r}: unknown LoRA option {k!r}")
        d["lora"] = lora
    elif name == "random_params":
        for k, v in kw.items():
            if k != "k":
                raise EDLConfigError(f"method spec {spec!r}: unknown option {k!r} (use k=...)")
            d["random_params_k"] = int(v)
    elif kw:
        raise EDLConfigError(f"method spec {spec!r}: {name!r} takes no options")
    return EDLConfig(**d)
