"""sim2reason: physics simulators as question-answer generators for RL on LLMs.

Prabhudesai, Satpathy et al., "Solving Physics Olympiad via Reinforcement Learning on Physics
Simulators" (2026). Random scenes written in a small YAML DSL are simulated (closed form / RK4
here, MuJoCo with the ``mujoco`` extra), recorded quantities become numeric, reverse and
symbolic questions, questions that a sub-scene can answer are dropped (shortcut filter), and a
model is trained with GRPO on a binary 5 % answer-checking reward.

Importing this package does not import torch; the public names load lazily.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from llmcore.lazy import lazy_exports
from llmcore.registry import MethodInfo

try:
    __version__ = version("sim2reason")
except PackageNotFoundError:  # pragma: no cover
    __version__ = "0.0.0"

METHOD = MethodInfo(
    name="sim2reason",
    paper="Solving Physics Olympiad via Reinforcement Learning on Physics Simulators (2026)",
    summary="scene DSL + simulators -> QA with a shortcut filter -> 5 % reward -> GRPO",
    demo="sim2reason.demo:run",
    package="sim2reason",
    tags=("rl", "grpo", "physics", "synthetic-data", "simulation"),
)

_LAZY = {
    "Scene": ".dsl",
    "Entity": ".dsl",
    "Tendon": ".dsl",
    "TendonEnd": ".dsl",
    "load_yaml": ".dsl",
    "dump_yaml": ".dsl",
    "validate": ".dsl",
    "SCENE_TYPES": ".generate",
    "SceneGenerator": ".generate",
    "generate_scenes": ".generate",
    "AnalyticEngine": ".engines",
    "Engine": ".engines",
    "get_engine": ".engines",
    "Recording": ".recording",
    "QAPair": ".qa",
    "QUANTITIES": ".qa",
    "generate_qa": ".qa",
    "describe": ".qa",
    "child_scenes": ".filters",
    "shortcut_filter": ".filters",
    "dedup": ".filters",
    "scenes_to_qa": ".pipeline",
    "sim2reason_reward": ".rewards",
    "eval_reward": ".rewards",
    "check_answer": ".rewards",
    "to_float": ".rewards",
    "numeric_match": ".rewards",
    "symbolic_match": ".rewards",
    "to_dataset": ".data",
    "write_verl_parquet": ".data",
    "read_verl_parquet": ".data",
    "grpo_config": ".train",
    "train_grpo": ".train",
    "prefilter_by_pass_rate": ".train",
    "accuracy": ".evaluate",
    "Sim2ReasonError": ".errors",
    "SceneError": ".errors",
    "UnsupportedFamilyError": ".errors",
    "QAError": ".errors",
}

__all__ = ["METHOD", "__version__", *_LAZY]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
