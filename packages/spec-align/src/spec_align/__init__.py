"""spec-align: SpecBench specification alignment and test-time deliberation.

Zhang et al., "Reasoning over Boundaries: Enhancing Specification Alignment via Test-time
Deliberation" (ICML 2026, arXiv 2509.14760). Importing this package does not import torch.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from llmcore.registry import MethodInfo
from spec_align.backends import (
    Backend,
    Completion,
    GenParams,
    HFBackend,
    OpenAICompatBackend,
    VLLMBackend,
    get_backend,
)
from spec_align.data import (
    SCENARIOS,
    PromptItem,
    Scenario,
    load_scenario,
    load_scenario_hf,
    write_scenario,
)
from spec_align.errors import (
    BackendCapabilityError,
    DataFormatError,
    JudgeParseError,
    RuleMissingError,
    SpecAlignError,
    SpecBackendError,
    SpecFormatError,
)
from spec_align.judge import (
    Judge,
    LLMJudge,
    RuleJudge,
    Verdict,
    build_joint_prompt,
    get_judge,
    parse_joint,
)
from spec_align.pipeline import evaluate, generate
from spec_align.prompts import DEFAULT_TEMPLATES, TINY_TEMPLATES, Templates, augment_prompt
from spec_align.rules import Rule, RuleSet
from spec_align.scoring import ALPHA, ScoreReport, aggregate, item_score, macro_average
from spec_align.synth import make_synthetic_scenario
from spec_align.ttd import (
    TPO,
    Align3,
    BestOfN,
    MoreThink,
    Raw,
    SelfRefine,
    TTDMethod,
    TTDResult,
    Vanilla,
    ZeroThink,
    get_method,
)

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
