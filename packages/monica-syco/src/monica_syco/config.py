"""Config dataclasses of the CLI subcommands (flags and ``--config FILE`` come from these).
Every default is this package's reconstruction, not a number from the paper."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass
class MonitorSettings:
    """Monitor and calibrator settings shared by generate / eval (section 2.5 table)."""

    threshold: float | None = None
    """trigger threshold tau (None: the fitted calibrator's, default 0.5)"""
    release_gap: float | None = None
    """release at SDS < tau - gap (None: fitted, default 0.1)"""
    alpha_min: float | None = None
    """minimum strength in |v_l| units (None: fitted, default 0.5)"""
    alpha_max: float | None = None
    """maximum strength (None: the value chosen on dev, default 2.0)"""
    mode: Literal["add", "clamp", "logit"] | None = None
    """calibrator mode (None: fitted, default add)"""
    scope: Literal["until_release", "next_step"] | None = None
    """activation window (None: fitted, default until_release)"""
    apply_to_answer: bool | None = None
    """keep calibrating after the think-close tag (None: fitted, default true)"""
    logit_beta: float | None = None
    """logit-mode penalty (None: fitted, default 5.0)"""
    delimiter: str = r"\n\s*\n"
    """step delimiter regex"""
    max_step_tokens: int = 64
    """force a boundary after this many tokens"""
    think_open: str = "<think>"
    """think-open tag"""
    think_close: str = "</think>"
    """think-close tag"""
    strict: bool = True
    """fingerprint mismatch is an error (false: a warning)"""


@dataclass
class CollectConfig:
    """Induction: trajectories, step labels and pooled step states."""

    layers: str = "default"
    """comma list of blocks, 'default' (depth 0.5, 0.75) or 'auto' (every block; fit picks 2)"""
    n_samples: int = 4
    """trajectories per prompt"""
    temperature: float = 1.0
    """sampling temperature (greedy when n_samples = 1)"""
    max_new_tokens: int = 256
    """generation budget"""
    batch_size: int = 16
    """prompts per generate call"""
    labeler: str = "rule"
    """'rule' or 'llm:MODEL@URL' (OpenAI-compatible judge; key from OPENAI_API_KEY)"""
    seed: int = 0
    """sampling seed"""
    require_clean_correct: bool = True
    """sycophantic only if the clean run of the item is correct"""


@dataclass
class FitConfig:
    """Fit probes and calibration vectors on a step dataset."""

    probe: Literal["logistic", "diffmean"] = "logistic"
    """per-layer probe"""
    window: int = 2
    """context window in steps"""
    layers: str = "auto"
    """'auto' (top-2 dev AUROC) or a comma list"""
    aggregate: Literal["mean", "max"] = "mean"
    """layer aggregation"""
    C: float = 1.0
    """inverse L2 strength of the logistic probe"""
    mode: Literal["add", "clamp", "logit"] = "add"
    """calibrator mode stored with the vectors"""
    threshold: float = 0.5
    """tau stored with the calibrator"""
    alpha_max: float = 2.0
    """alpha_max when no dev items are given"""
    alpha_grid: str = "0.5,1,2,4,8"
    """alpha_max candidates tried on dev items"""
    tune_threshold: bool = False
    """pick tau on dev by Youden's J (needs --model and --dev-items)"""
    max_new_tokens: int = 256
    """generation budget for the dev runs"""
    seed: int = 0
    """split / balancing seed"""


@dataclass
class BenchConfig:
    """Overhead benchmark on the world's tiny model (section 7)."""

    batch_sizes: tuple[int, ...] = (1, 8)
    """batch sizes"""
    new_tokens: int = 128
    """new tokens per row (min = max, so every method runs the same passes)"""
    repeats: int = 5
    """timed repeats (median reported)"""
    n_entities: int = 48
    """world size"""
