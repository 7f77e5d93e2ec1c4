"""compgen-rl: RL after SFT for compositional generalisation on latent-module string tasks.

Reconstructs "From Reasoning Traces to Reusable Modules: Understanding Compositional
Generalization in Language Model Reasoning" (ICML 2026): reasoning traces are cascades of latent
selections of reusable modules (skills and routing mechanisms); SFT on canonical traces leaves
unseen local events unidentified, while GRPO on an outcome reward enriches events that are
reward-informative and rollout-reachable, so SFT->RL solves unseen recombinations.

Importing this package does not import torch; the public names load lazily.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from llmcore.lazy import lazy_exports
from llmcore.registry import MethodInfo

try:
    __version__ = version("compgen-rl")
except PackageNotFoundError:  # pragma: no cover
    __version__ = "0.0.0"

METHOD = MethodInfo(
    name="compgen-rl",
    paper="From Reasoning Traces to Reusable Modules: Understanding Compositional Generalization in "
    "Language Model Reasoning (ICML 2026)",
    summary="latent-module string tasks; SFT vs SFT->GRPO (dynamic sampling) vs SFT->RFT on unseen compositions",
    demo="compgen_rl.demo:run",
    package="compgen-rl",
    tags=("reinforcement-learning", "grpo", "compositional-generalization", "synthetic-tasks"),
)

_LAZY = {
    "Skill": ".modules",
    "Routing": ".modules",
    "Inventory": ".modules",
    "SKILLS": ".modules",
    "ROUTINGS": ".modules",
    "register_skill": ".modules",
    "register_routing": ".modules",
    "get_inventory": ".modules",
    "Program": ".hlsm",
    "Trace": ".hlsm",
    "ParsedTrace": ".hlsm",
    "execute": ".hlsm",
    "sample_program": ".hlsm",
    "render_prompt": ".hlsm",
    "render_trace": ".hlsm",
    "parse_completion": ".hlsm",
    "extract_answer": ".hlsm",
    "SplitConfig": ".data",
    "build_splits": ".data",
    "build_rows": ".data",
    "check_splits": ".data",
    "write_splits": ".data",
    "load_splits": ".data",
    "exact_match_reward": ".rewards",
    "step_accuracy": ".rewards",
    "SFTArgs": ".train",
    "GRPOArgs": ".train",
    "RFTArgs": ".train",
    "ProtocolConfig": ".train",
    "run_sft": ".train",
    "run_grpo": ".train",
    "run_rft": ".train",
    "run_protocol": ".train",
    "prefilter_rows": ".train",
    "evaluate": ".evaluate",
    "paired_gain": ".evaluate",
    "atomic_recovery": ".evaluate",
    "enrichment_rate": ".theory",
    "reinforce_gradient_mc": ".theory",
    "coverage": ".theory",
    "support": ".theory",
    "CompgenError": ".errors",
    "UnknownModuleError": ".errors",
    "InfeasibleSplitError": ".errors",
    "SplitCheckError": ".errors",
}

__all__ = ["METHOD", "__version__", *_LAZY]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
