"""spec-align: SpecBench specification alignment and test-time deliberation.

Zhang et al., "Reasoning over Boundaries: Enhancing Specification Alignment via Test-time
Deliberation" (ICML 2026, arXiv 2509.14760). Importing this package imports none of its
submodules (nor torch): every public name below is loaded on first access.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from llmcore.lazy import lazy_exports
from llmcore.registry import MethodInfo

_LAZY = {
    "Backend": ".backends",
    "Completion": ".backends",
    "GenParams": ".backends",
    "HFBackend": ".backends",
    "OpenAICompatBackend": ".backends",
    "VLLMBackend": ".backends",
    "get_backend": ".backends",
    "SCENARIOS": ".data",
    "PromptItem": ".data",
    "Scenario": ".data",
    "load_scenario": ".data",
    "load_scenario_hf": ".data",
    "write_scenario": ".data",
    "BackendCapabilityError": ".errors",
    "DataFormatError": ".errors",
    "JudgeParseError": ".errors",
    "RuleMissingError": ".errors",
    "SpecAlignError": ".errors",
    "SpecBackendError": ".errors",
    "SpecConfigError": ".errors",
    "SpecFormatError": ".errors",
    "Judge": ".judge",
    "LLMJudge": ".judge",
    "RuleJudge": ".judge",
    "Verdict": ".judge",
    "build_joint_prompt": ".judge",
    "get_judge": ".judge",
    "parse_joint": ".judge",
    "evaluate": ".pipeline",
    "generate": ".pipeline",
    "DEFAULT_TEMPLATES": ".prompts",
    "TINY_TEMPLATES": ".prompts",
    "Templates": ".prompts",
    "augment_prompt": ".prompts",
    "Rule": ".rules",
    "RuleSet": ".rules",
    "ALPHA": ".scoring",
    "ScoreReport": ".scoring",
    "aggregate": ".scoring",
    "item_score": ".scoring",
    "macro_average": ".scoring",
    "make_synthetic_scenario": ".synth",
    "TPO": ".ttd",
    "Align3": ".ttd",
    "BestOfN": ".ttd",
    "MoreThink": ".ttd",
    "Raw": ".ttd",
    "SelfRefine": ".ttd",
    "TTDMethod": ".ttd",
    "TTDResult": ".ttd",
    "Vanilla": ".ttd",
    "ZeroThink": ".ttd",
    "get_method": ".ttd",
}

try:
    __version__ = version("spec-align")
except PackageNotFoundError:  # pragma: no cover
    __version__ = "0.0.0"

METHOD = MethodInfo(
    name="spec-align",
    paper="Reasoning over Boundaries: Enhancing Specification Alignment via Test-time "
    "Deliberation (ICML 2026)",
    summary="SpecBench (safety + behavioral specs, SAR) and test-time deliberation: Align3 vs "
    "vanilla, ZeroThink, MoreThink, Self-Refine, Best-of-N, TPO",
    demo="spec_align.demo:run",
    package="spec-align",
    tags=("alignment", "benchmark", "test-time"),
)

__all__ = [
    "ALPHA",
    "DEFAULT_TEMPLATES",
    "METHOD",
    "SCENARIOS",
    "TINY_TEMPLATES",
    "TPO",
    "Align3",
    "Backend",
    "BackendCapabilityError",
    "BestOfN",
    "Completion",
    "DataFormatError",
    "GenParams",
    "HFBackend",
    "Judge",
    "JudgeParseError",
    "LLMJudge",
    "MoreThink",
    "OpenAICompatBackend",
    "PromptItem",
    "Raw",
    "Rule",
    "RuleJudge",
    "RuleMissingError",
    "RuleSet",
    "Scenario",
    "ScoreReport",
    "SelfRefine",
    "SpecAlignError",
    "SpecBackendError",
    "SpecConfigError",
    "SpecFormatError",
    "TTDMethod",
    "TTDResult",
    "Templates",
    "VLLMBackend",
    "Vanilla",
    "Verdict",
    "ZeroThink",
    "__version__",
    "aggregate",
    "augment_prompt",
    "build_joint_prompt",
    "evaluate",
    "generate",
    "get_backend",
    "get_judge",
    "get_method",
    "item_score",
    "load_scenario",
    "load_scenario_hf",
    "macro_average",
    "make_synthetic_scenario",
    "parse_joint",
    "write_scenario",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
