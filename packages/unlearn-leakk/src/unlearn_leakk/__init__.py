"""unlearn-leakk: leak@k meta-evaluation of LLM unlearning (Reisizadeh et al., arXiv 2511.04934).

Public names are exported lazily: ``import unlearn_leakk`` imports neither torch nor the
submodules; ``unlearn_leakk.unlearn`` imports ``unlearn_leakk.trainers`` on first use.
"""

from __future__ import annotations

from importlib import metadata

from llmcore.lazy import lazy_exports
from llmcore.registry import MethodInfo

try:
    __version__ = metadata.version("unlearn-leakk")
except metadata.PackageNotFoundError:  # pragma: no cover - source tree without install
    __version__ = "0.0.0"

METHOD = MethodInfo(
    name="unlearn-leakk",
    paper="Leak@k: Unlearning Does Not Make LLMs Forget Under Probabilistic Decoding",
    summary="leak@k of unlearned models under sampling; GradDiff/NPO/... baselines and RULE",
    demo="unlearn_leakk.demo:run",
    tags=("unlearning", "evaluation"),
)

_LAZY = {
    "LeakKError": "errors",
    "LeakConfigError": "errors",
    "LeakDataError": "errors",
    "JudgeUnavailableError": "errors",
    "UnlearnError": "errors",
    "DecodingConfig": "config",
    "UnlearnConfig": "config",
    "RULEConfig": "config",
    "OFFICIAL_PAIRS": "config",
    "K_DEFAULT": "config",
    "leak_at_k": "estimator",
    "leak_at_k_comb": "estimator",
    "leak_at_k_curve": "estimator",
    "expected_max_at_k": "estimator",
    "expected_max_curve": "estimator",
    "LeakItem": "data",
    "load_tofu": "data",
    "load_muse": "data",
    "load_wmdp": "data",
    "load_jsonl": "data",
    "LeakJudge": "judges",
    "RougeRecallJudge": "judges",
    "ExactPhraseJudge": "judges",
    "NLIEntailmentJudge": "judges",
    "CosineJudge": "judges",
    "LLMJudge": "judges",
    "MCQJudge": "judges",
    "get_judge": "judges",
    "sample_responses": "sampling",
    "render_prompts": "sampling",
    "evaluate_leak": "evaluate",
    "LeakReport": "evaluate",
    "unlearn": "trainers",
    "METHODS": "trainers",
    "GreedyForgetStop": "trainers",
    "UnlearnTrainer": "trainers",
    "greedy_accuracy": "trainers",
    "rule_unlearn": "rule",
    "RULEHistory": "rule",
    "make_world": "world",
    "world_recipe": "world",
}

__all__ = ["METHOD", "__version__", *_LAZY]

__getattr__, __dir__ = lazy_exports(__name__, {name: f".{mod}" for name, mod in _LAZY.items()})
