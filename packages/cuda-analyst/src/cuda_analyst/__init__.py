"""cuda-analyst: frozen-trajectory attribution of feedback-to-plan decisions in kernel-generating
LLM agents (CUDAnalyst; Chong, Wu, Zhang, Qu, ICML 2026), with CPU stand-in kernel backends.

Importing this package does not import torch; the public names load lazily.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from llmcore.lazy import lazy_exports
from llmcore.registry import MethodInfo

try:
    __version__ = version("cuda-analyst")
except PackageNotFoundError:  # pragma: no cover
    __version__ = "0.0.0"

METHOD = MethodInfo(
    name="cuda-analyst",
    paper="Towards Feedback-to-Plan Decisions for Self-Evolving LLM Agents in CUDA Kernel Generation (ICML 2026)",
    summary="freeze a kernel-agent trajectory, re-plan with selected feedback, Shapley-attribute the effects",
    demo="cuda_analyst.demo:run",
    package="cuda-analyst",
    tags=("agents", "attribution", "kernels"),
)

_LAZY = {
    "AnalysisMask": ".masks",
    "coalition_masks": ".masks",
    "parse_masks": ".masks",
    "Task": ".tasks",
    "get_task": ".tasks",
    "load_task": ".tasks",
    "BUILTIN_TASKS": ".tasks",
    "KernelBackend": ".backends",
    "CBackend": ".backends",
    "CudaCompileOnlyBackend": ".backends",
    "NumpyBackend": ".backends",
    "NumbaBackend": ".backends",
    "TritonInterpreterBackend": ".backends",
    "get_backend": ".backends",
    "from_kernelbench": ".kernelbench",
    "KernelBenchReference": ".kernelbench",
    "CompileResult": ".backends",
    "CheckResult": ".backends",
    "Timing": ".backends",
    "Evaluator": ".evaluator",
    "EvalCache": ".evaluator",
    "Result": ".evaluator",
    "Sandbox": ".sandbox",
    "SandboxLimits": ".sandbox",
    "FeedbackComponent": ".feedback",
    "ErrorFeedback": ".feedback",
    "CompileLogFeedback": ".feedback",
    "CorrectnessFeedback": ".feedback",
    "StaticLoopFeedback": ".feedback",
    "ProfileFeedback": ".feedback",
    "ReferenceFeedback": ".feedback",
    "build_reports": ".feedback",
    "Report": ".prompting",
    "decision_block": ".prompting",
    "inject": ".prompting",
    "extract_code": ".prompting",
    "PLACEBO_PLAN": ".prompting",
    "MockLLM": ".llm",
    "make_llm": ".llm",
    "evolve": ".trajectory",
    "group_openevolve_by_gen": ".trajectory",
    "group_llm4ad_by_gen": ".trajectory",
    "load_frozen": ".trajectory",
    "intervene": ".intervene",
    "load_results": ".intervene",
    "attribute": ".attribution",
    "Attribution": ".attribution",
    "label_stats": ".attribution",
    "shapley": ".attribution",
    "banzhaf": ".attribution",
    "mobius": ".attribution",
    "official_synergy": ".attribution",
    "shapley_interaction": ".attribution",
    "shapley_sampled": ".attribution",
    "run_planted": ".experiment",
    "run_bench": ".bench",
    "CudaAnalystError": ".errors",
    "AnalystValueError": ".errors",
    "FrozenDataError": ".errors",
    "IsolationError": ".errors",
    "ToolUnavailableError": ".errors",
}

__all__ = ["METHOD", "__version__", *_LAZY]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
