"""cds_icl: many-shot chain-of-thought in-context learning with Curvilinear Demonstration
Selection (Chung, Liu, Yu, Yeung; Findings of ICML 2026, arXiv 2605.13511).

Demonstrations are ordered as a travelling-salesperson path in embedding space that penalises
sharp turns (CDS), drawn from pools the target model wrote itself, and compared with random,
KATE, complexity and high-curvature baselines through llmcore backends and lm-eval tasks.

Importing this package does not import torch; the public names load lazily.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from llmcore.lazy import lazy_exports
from llmcore.registry import MethodInfo

try:
    __version__ = version("cds-icl")
except PackageNotFoundError:  # pragma: no cover
    __version__ = "0.0.0"

METHOD = MethodInfo(
    name="cds-icl",
    paper="Many-Shot CoT-ICL: Making In-Context Learning Truly Learn (Findings of ICML 2026)",
    summary="order many-shot CoT demos along a low-curvature TSP path in embedding space (CDS)",
    demo="cds_icl.demo:run",
    package="cds-icl",
    tags=("in-context-learning", "demonstration-selection", "chain-of-thought"),
)

_LAZY = {
    "cds_order": ".tsp",
    "cost_matrix": ".tsp",
    "curvature_matrix": ".tsp",
    "path_curvature": ".tsp",
    "path_score": ".tsp",
    "two_opt": ".tsp",
    "two_opt_naive": ".tsp",
    "Demo": ".pool",
    "DemoPool": ".pool",
    "OrderFile": ".pool",
    "embed": ".embed",
    "Embedder": ".embed",
    "RandomSelector": ".selectors",
    "OriginalSelector": ".selectors",
    "KATESelector": ".selectors",
    "DissimilarSelector": ".selectors",
    "ComplexitySelector": ".selectors",
    "CDSSelector": ".selectors",
    "UnderstandabilitySelector": ".selectors",
    "make_selector": ".selectors",
    "understandability": ".understand",
    "generate_self_pool": ".selfgen",
    "build_prompt": ".prompts",
    "grade_math": ".grading",
    "grade_gsm8k": ".grading",
    "evaluate": ".runner",
    "EvalResult": ".runner",
    "load_task": ".runner",
    "register_lm_eval_tasks": ".lmeval_tasks",
    "CDSError": ".errors",
    "CDSInputError": ".errors",
    "ContextLengthError": ".errors",
    "OfflineEncoderError": ".errors",
}

__all__ = ["METHOD", "__version__", *_LAZY]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
