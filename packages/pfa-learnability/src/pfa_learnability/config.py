"""Configuration dataclasses of the command line and the experiment runners (CPU-safe
defaults; each field documents itself and becomes a flag through ``llmcore.config``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass
class GenConfig:
    """Random PFA generator (paper's §2.1 defaults)."""

    states: int = field(default=8, metadata={"help": "number of states"})
    alphabet: int = field(default=6, metadata={"help": "alphabet size |Σ|"})
    out_degree: int = field(default=3, metadata={"help": "out-arcs per state"})
    alpha: float = field(default=1.0, metadata={"help": "Dirichlet concentration of arc weights"})
    mean_length: float = field(default=20.0, metadata={"help": "target expected string length"})
    deterministic: bool = field(default=True, metadata={"help": "generate a PDFA"})
    seed: int = field(default=0, metadata={"help": "generator seed"})


@dataclass
class SampleConfig:
    """Corpus sampling under an intervention on a property."""

    prop: str = field(
        default="sym:a", metadata={"help": "arc:<q>:<sym>:<q2>, sym:<sym> or enter:<q>"}
    )
    mode: str = field(
        default="tilt", metadata={"help": "tilt, natural, exact:<k> or mixture:{k: w}"}
    )
    factor: float = field(default=1.0, metadata={"help": "tilt factor f (E count = f × natural)"})
    n: int = field(default=20000, metadata={"help": "number of strings"})
    bins: int = field(default=16, metadata={"help": "number of exact bins B"})
    seed: int = field(default=0, metadata={"help": "sampling seed"})
    max_length: int = field(default=512, metadata={"help": "raise when a string gets this long"})
    tilt_method: Literal["pushed", "bins"] = field(
        default="pushed", metadata={"help": "tilt through the pushed PFA or a mixture of bins"}
    )


@dataclass
class TrainConfig:
    """Language-model learner."""

    arch: Literal["llama", "qwen2", "lstm"] = field(
        default="llama", metadata={"help": "architecture"}
    )
    d_model: int = field(default=64, metadata={"help": "hidden size"})
    n_layers: int = field(default=2, metadata={"help": "layers"})
    n_heads: int = field(default=4, metadata={"help": "attention heads (transformers)"})
    steps: int = field(default=2000, metadata={"help": "optimiser steps"})
    lr: float = field(default=3e-3, metadata={"help": "peak learning rate"})
    batch_size: int = field(default=64, metadata={"help": "strings per step"})
    seed: int = field(default=0, metadata={"help": "initialisation and batching seed"})


@dataclass
class EvalConfig:
    """Decomposed KL evaluation."""

    prop: str | None = field(default=None, metadata={"help": "property whose decisions to score"})
    n_eval: int = field(default=2000, metadata={"help": "evaluation strings from the reference"})
    seed: int = field(default=0, metadata={"help": "evaluation seed"})
    unit: Literal["nats", "bits"] = field(default="nats", metadata={"help": "KL unit"})
    reference: Literal["training", "natural"] = field(
        default="natural",
        metadata={"help": "natural PFA, or the corpus's training distribution (needs --corpus)"},
    )
    batch_size: int = field(default=64, metadata={"help": "strings per LM forward"})
    device: str = field(default="cpu", metadata={"help": "torch device of the LM"})


@dataclass
class ExperimentConfig:
    """Planted-confounder learnability experiment (paper's §2.6 analyses)."""

    n_automata: int = field(default=30, metadata={"help": "automata (one targeted arc each)"})
    n_strings: int = field(default=5000, metadata={"help": "corpus size N (fixed across f)"})
    factors: list[float] = field(
        default_factory=lambda: [0.25, 0.5, 1.0, 2.0, 4.0], metadata={"help": "tilt factors f"}
    )
    seeds: list[int] = field(default_factory=lambda: [0], metadata={"help": "corpus seeds"})
    suite_seed: int = field(default=0, metadata={"help": "seed of the automaton suite"})
    p_tau_min: float = field(default=0.03, metadata={"help": "smallest planted p_τ"})
    p_tau_max: float = field(default=0.5, metadata={"help": "largest planted p_τ"})
    constant_p_tau: float | None = field(
        default=None, metadata={"help": "hold p_τ constant (the unconfounded control)"}
    )
    visits_min: float = field(default=1.5, metadata={"help": "smallest source-state visit target"})
    visits_max: float = field(default=3.0, metadata={"help": "largest source-state visit target"})
    learner: Literal["add-alpha", "llama", "qwen2", "lstm"] = field(
        default="add-alpha", metadata={"help": "learner (neural ones train one model per cell)"}
    )
    alpha: float = field(default=0.5, metadata={"help": "add-α smoothing"})
    expected: bool = field(
        default=True,
        metadata={"help": "add-α: expected decision KL given the realised visits (else realised)"},
    )
    steps: int = field(default=800, metadata={"help": "neural learners: training steps"})
    d_model: int = field(default=64, metadata={"help": "neural learners: hidden size"})
    n_layers: int = field(default=2, metadata={"help": "neural learners: layers"})
    n_eval: int = field(default=500, metadata={"help": "neural learners: KL evaluation strings"})
