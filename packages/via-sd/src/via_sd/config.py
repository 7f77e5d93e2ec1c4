"""Configuration of the decoders."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

from via_sd.errors import ViaSDConfigError

#: HF assisted-generation keyword names accepted as aliases.
ALIASES: dict[str, str] = {
    "num_assistant_tokens": "gamma",
    "num_speculative_tokens": "gamma",
    "draft_length": "gamma",
}


@dataclass
class ViaSDConfig:
    """Decoding configuration shared by AR, standard SD and VIA-SD.

    The two VIA-SD gates compare r_j = q'(d_j)/max_v q'(v) with ``tau_accept``
    (tier A: keep the draft) and ``tau_escalate`` (below it: tier C, the full verifier q).
    The paper writes them as (1-alpha1)*max q' and (1-alpha2)*max q'; see :meth:`from_alphas`.
    """

    gamma: int = field(default=5, metadata={"help": "draft length per block (γ)"})
    tau_accept: float = field(
        default=0.7, metadata={"help": "tier-A gate on r_j = q'(d)/max q' (keep the draft)"}
    )
    tau_escalate: float = field(
        default=0.5,
        metadata={"help": "tier-C gate: r_j below it goes to the full verifier q (> 1: all)"},
    )
    temperature: float = field(default=0.0, metadata={"help": "0 = greedy; > 0 samples"})
    top_k: int | None = field(default=None, metadata={"help": "top-k filter when sampling"})
    top_p: float | None = field(default=None, metadata={"help": "nucleus filter when sampling"})
    max_new_tokens: int = field(default=128, metadata={"help": "new tokens to generate"})
    bonus_token: bool = field(
        default=True, metadata={"help": "emit a bonus token when every draft survives"}
    )
    eos_token_id: int | None = field(
        default=None, metadata={"help": "stop token id (default: the model config's eos)"}
    )
    seed: int = field(default=0, metadata={"help": "seed of the sampling generator"})
    measure_divergence: bool = field(
        default=False,
        metadata={"help": "score emitted tokens against argmax q (one uncharged q pass)"},
    )

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise :class:`ViaSDConfigError` on any out-of-range value."""
        if isinstance(self.gamma, bool) or not isinstance(self.gamma, int) or self.gamma < 1:
            raise ViaSDConfigError(f"gamma must be an integer >= 1, got {self.gamma!r}")
        if (
            isinstance(self.max_new_tokens, bool)
            or not isinstance(self.max_new_tokens, int)
            or self.max_new_tokens < 1
        ):
            raise ViaSDConfigError(
                f"max_new_tokens must be an integer >= 1, got {self.max_new_tokens!r}"
            )
        for name in ("tau_accept", "tau_escalate", "temperature"):
            v = getattr(self, name)
            if not isinstance(v, int | float) or math.isnan(v) or v < 0:
                raise ViaSDConfigError(f"{name} must be a number >= 0, got {v!r}")
        if self.tau_escalate > self.tau_accept:
            raise ViaSDConfigError(
                f"tau_escalate={self.tau_escalate} must not exceed tau_accept={self.tau_accept} "
                "(tier C sits below tier B); to escalate every token set both to 1.01"
            )
        if self.top_p is not None and not 0.0 < self.top_p <= 1.0:
            raise ViaSDConfigError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if self.top_k is not None and (not isinstance(self.top_k, int) or self.top_k < 1):
            raise ViaSDConfigError(f"top_k must be an integer >= 1, got {self.top_k!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @classmethod
    def from_alphas(cls, alpha1: float, alpha2: float, **kw: Any) -> ViaSDConfig:
        """Map the paper's lenience levels to gates: tau_accept = 1 - min(a1, a2),
        tau_escalate = 1 - max(a1, a2) (alpha1=0.5, alpha2=0.3 give 0.7, 0.5)."""
        for name, a in (("alpha1", alpha1), ("alpha2", alpha2)):
            if not isinstance(a, int | float) or not 0.0 <= a < 1.0:
                raise ViaSDConfigError(f"{name} must be in [0, 1), got {a!r}")
        return cls(
            tau_accept=1.0 - min(alpha1, alpha2), tau_escalate=1.0 - max(alpha1, alpha2), **kw
        )

    @classmethod
    def from_kwargs(cls, **kw: Any) -> ViaSDConfig:
        """Build from keyword arguments, accepting HF names (``num_assistant_tokens`` → gamma)."""
        known = {f.name for f in fields(cls)}
        out: dict[str, Any] = {}
        for k, v in kw.items():
            k = ALIASES.get(k, k)
            if k not in known:
                raise ViaSDConfigError(
                    f"unknown option {k!r}; known: {', '.join(sorted(known | set(ALIASES)))}"
                )
            out[k] = v
        return cls(**out)
