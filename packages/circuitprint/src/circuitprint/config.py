"""Configuration dataclasses (torch-free, so the command line's ``--help`` stays fast)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from circuitprint.errors import SignatureError

SuppressMode = Literal["zero", "mean", "inhibit"]


@dataclass
class DiscoverConfig:
    """Circuit discovery and supernode settings (sections 2.3-2.4)."""

    basis: Literal["neuron", "head", "transcoder"] = "neuron"
    transcoder: str | None = None
    """Transcoder safetensors for the transcoder basis."""
    layers: list[int] | None = None
    mass: float = 0.8
    k_max: int = 64
    supernodes: Literal["cluster", "topk"] = "cluster"
    """``cluster``: clusters of the family backbone; ``topk``: top-k attributed nodes per role."""
    sim: float = 0.7
    backbone_frac: float = 0.5
    top_k: int = 64
    suppress_mode: Literal["zero", "mean", "inhibit"] = "zero"
    flip_min: float = 0.6
    random_max: float = 0.2
    n_random: int = 10
    min_p: float = 0.5
    min_per_family: int = 8
    check_faithfulness: bool = True
    seed: int = 0

    def node_spec(self) -> Any:
        """The :class:`~circuitprint.nodes.NodeSpec` of these settings."""
        from circuitprint.nodes import NodeSpec

        return NodeSpec(self.basis, tuple(self.layers) if self.layers is not None else None,
                        transcoder=self.transcoder)  # fmt: skip


@dataclass
class TriggerConfig:
    """Trigger search and signature rules."""

    edit: Literal["insert", "replace"] = "insert"
    """``insert``: ``n_edit`` new tokens right before the subject; ``replace``: edit the
    token positions ``replace_slots`` (which must not change the true answer)."""
    n_edit: int = 4
    replace_slots: tuple[int, ...] = ()
    lambda_s: float = 1.0
    """Weight of the suppression term max(0, a_S(x')/a_S(x) - rho)."""
    rho: float | None = 0.3
    """Suppression target; ``None`` drops the term and the a_S(x') <= rho a_S(x) check."""
    lambda_f: float = 0.0
    """Weight of the edited span's negative log-likelihood (fluency)."""
    topk: int = 64
    batch: int = 128
    steps: int = 150
    seed: int = 0
    restarts: int = 1
    """Independent searches (different random starts) per (supernode, prompt)."""
    exhaustive_max: int = 4096
    """If |V_E| * |E| <= this, every single swap is scored exactly each step."""
    vocab: tuple[str, ...] | None = None
    """Allowed edit tokens (``None``: every printable non-special token that passes the
    answer/subject filters)."""
    placeholder: str | None = None
    """Token that masks the subject for the distinctiveness check (``None``: unk token)."""
    suppress_mode: SuppressMode = "zero"
    answer_set: tuple[str, ...] | None = None
    """Tokens y' may take (``None``: the probe answers)."""
    max_prompts: int | None = None
    """Family prompts searched per supernode (``None``: all confident ones)."""
    n_triggers: int = 32
    min_triggers: int = 16
    min_supernodes: int = 4
    max_share: float = 0.25
    """Largest share of the signature one supernode may contribute."""
    reference_max: float = 0.5
    """Drop a trigger if this share of reference models answer y' on it."""

    def __post_init__(self) -> None:
        if self.edit not in ("insert", "replace"):
            raise SignatureError(f"edit {self.edit!r}: use insert or replace")
        if self.edit == "replace" and not self.replace_slots:
            raise SignatureError("edit='replace' needs replace_slots (editable token positions)")
        if self.n_edit < 1:
            raise SignatureError(f"n_edit must be >= 1, got {self.n_edit}")
        if not 0 < self.max_share <= 1:
            raise SignatureError(f"max_share must lie in (0, 1], got {self.max_share}")


@dataclass
class VerifyConfig:
    """Suspect-side verification (section 2.6)."""

    signature: str = ""
    """Signature JSON written by ``circuitprint triggers``."""
    suspect: str = ""
    """Local path / hub id (``hf``, ``vllm``) or base URL (``openai``) of the suspect."""
    backend: Literal["hf", "vllm", "openai"] = "hf"
    served_model: str = ""
    """Model name on the OpenAI-compatible server (``openai`` backend)."""
    mode: Literal["top1", "logprob"] = "top1"
    reference_tmr: float | None = None
    """Mean TMR of independent reference models (r0 = max(0.05, this))."""
    p_max: float = 1e-3
    tmr_min: float = 0.5
    out: str = ""
    """Verdict JSON path (optional)."""
