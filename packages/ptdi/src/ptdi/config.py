"""Configuration dataclasses of the ``ptdi`` commands (one flag per field, ``--config FILE``)."""

from __future__ import annotations

from dataclasses import dataclass

from ptdi.errors import PTDIConfigError


def parse_floats(text: str, what: str) -> list[float]:
    """``"0.1,0.2"`` -> ``[0.1, 0.2]`` with a clear error on a bad entry."""
    try:
        return [float(x) for x in str(text).split(",") if x.strip()]
    except ValueError as exc:
        raise PTDIConfigError(f"{what} must be comma-separated numbers, got {text!r}") from exc


def parse_names(text: str) -> list[str]:
    return [x.strip() for x in str(text).split(",") if x.strip()]


@dataclass
class ScoreConfig:
    """``ptdi score``: membership scores of every text under one causal LM."""

    model: str = ""
    """Hub id or local path of the target model (safetensors; remote code is never run)."""
    data: str = ""
    """Input JSONL ({id, text, role, label}) or a Hugging Face dataset id (WikiMIA columns)."""
    out: str = "scores.jsonl"
    """Output scores JSONL; the metadata goes to the same name with ``.meta.json``."""
    revision: str | None = None
    """Model revision (branch, tag or commit)."""
    adapter: str | None = None
    """PEFT adapter path or id to attach (needs the ``peft`` extra)."""
    merge_adapter: bool = False
    """Merge the adapter into the weights instead of keeping it attached."""
    split: str = "WikiMIA_length64"
    """Dataset split when ``data`` is a Hugging Face dataset id."""
    text_key: str = "text"
    """Text field of the input rows (WikiMIA: ``input``, used when ``text`` is absent)."""
    scores: str = "loss,zlib,mink,minkpp"
    """Comma-separated scores: loss, zlib, lowercase, mink, minkpp, ref."""
    mink_k: float = 0.2
    """Fraction k of lowest-probability tokens for Min-K% and Min-K%++ (0 < k <= 1)."""
    max_length: int = 512
    """Tokens per text after truncation (BOS included)."""
    batch_size: int = 8
    """Texts per forward pass."""
    reference_model: str | None = None
    """Reference model for the ``ref`` score (NLL_ref - NLL_target)."""
    backend: str = "hf"
    """``hf`` (every score) or ``vllm`` (loss, zlib, lowercase, mink only)."""
    device: str | None = None
    """cpu, cuda or auto (llmcore's choice)."""
    dtype: str | None = None
    """fp32, bf16, fp16 (default: bf16 on CUDA, fp32 on CPU)."""
    drop_short: bool = False
    """Drop texts with fewer than 2 tokens instead of failing."""


@dataclass
class SelectConfig:
    """``ptdi select``: the PTDI selection on a scores file."""

    scores: str = "scores.jsonl"
    """Scores JSONL written by ``ptdi score`` (calibration and test rows by ``role``)."""
    score: str = "mink"
    """Which score column to use (fix it before looking at the test set)."""
    alpha: float = 0.1
    """Target false identification rate, in (0, 1)."""
    pi_estimator: str = "jkbb"
    """jkbb | jkbb_auto | storey | bh."""
    jkbb_gamma: float = 3.0
    """JKBB bandwidth ratio gamma (> 0)."""
    jkbb_z: float = 1.0
    """Standard errors added to the JKBB estimate (0 = no margin)."""
    lam: float = 0.5
    """Storey's lambda, in (0, 1)."""
    randomized_ties: bool = False
    """Randomised conformal p-values (ties broken by a uniform draw)."""
    seed: int = 0
    """Seed of the randomised p-values and of jkbb_auto's bootstrap."""
    out: str = "result.json"
    """Result JSON."""


@dataclass
class EvaluateConfig:
    """``ptdi evaluate``: mean FDP / Power / FPR / TPR over random splits of labelled scores."""

    scores: str = "scores.jsonl"
    """Scores JSONL with labels (1 = member, 0 = non-member)."""
    score: str = "mink"
    """Score column."""
    alphas: str = "0.1,0.2,0.3,0.4,0.5"
    """Comma-separated target levels."""
    pi_estimators: str = "bh,storey,jkbb"
    """Comma-separated estimators (jkbb, jkbb_auto, storey, bh, oracle)."""
    n_exp: int = 1000
    """Random splits."""
    test_member_ratio: float = 0.88
    """Share of members put in the test set."""
    test_nonmember_ratio: float = 0.06
    """Share of non-members put in the test set."""
    cal_ratio: float = 0.94
    """Share of non-members used for calibration."""
    jkbb_gamma: float = 3.0
    """JKBB bandwidth ratio gamma."""
    jkbb_z: float = 1.0
    """JKBB margin in standard errors."""
    seed: int = 0
    """Seed of the splits."""
    out: str = "eval.json"
    """Result JSON."""


@dataclass
class SimulateConfig:
    """``ptdi simulate``: Gaussian scores, non-members N(0, 1), members N(shift, 1)."""

    n_cal: int = 200
    """Calibration non-members."""
    m: int = 400
    """Test points."""
    pi: float = 0.5
    """Member share of the test set."""
    member_shift: float = 2.0
    """Mean of the members' scores."""
    alphas: str = "0.1"
    """Comma-separated target levels."""
    reps: int = 500
    """Repetitions."""
    estimators: str = "bh,storey,jkbb,jkbb_z0"
    """Comma-separated: bh, storey, jkbb, jkbb_z0, jkbb_auto, oracle."""
    seed: int = 0
    """Seed."""
    out: str | None = None
    """Optional result JSON."""
