"""d3llm: pseudo-trajectory distillation and entropy-based multi-block decoding for masked
diffusion LLMs (d3LLM, Qian et al., ICML 2026), with the AUP accuracy-under-parallelism metric.

Importing this package does not import torch; the public names load lazily.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from llmcore.lazy import lazy_exports
from llmcore.registry import MethodInfo

try:
    __version__ = version("d3llm")
except PackageNotFoundError:  # pragma: no cover
    __version__ = "0.0.0"

METHOD = MethodInfo(
    name="d3llm",
    paper="d3LLM: Ultra-Fast Diffusion LLM using Pseudo-Trajectory Distillation (ICML 2026)",
    summary="entropy multi-block decoding + pseudo-trajectory distillation; TPF and AUP",
    demo="d3llm.demo:run",
    package="d3llm",
    tags=("diffusion-lm", "parallel-decoding", "distillation", "efficiency"),
)

_LAZY = {
    "MaskedDiffusionLM": ".model",
    "build_tiny_mdlm": ".model",
    "load_mdlm": ".model",
    "PRESETS": ".model",
    "DecodeResult": ".decoding",
    "decode_vanilla": ".decoding",
    "decode_threshold": ".decoding",
    "decode_multiblock": ".decoding",
    "entropy": ".decoding",
    "tpf": ".metrics",
    "aup": ".metrics",
    "aup_weight": ".metrics",
    "aup_table": ".metrics",
    "read_points": ".metrics",
    "write_points": ".metrics",
    "D3LLMDistillConfig": ".distill",
    "PseudoTrajectoryCollator": ".distill",
    "D3LLMTrainer": ".distill",
    "d3llm_loss": ".distill",
    "run_distillation": ".distill",
    "extract_trajectories": ".distill",
    "boxed_answer_checker": ".distill",
    "exact_answer_checker": ".distill",
    "lora_model": ".distill",
    "ParityTask": ".task",
    "SortTask": ".task",
    "DigitTask": ".task",
    "TASKS": ".task",
    "make_task": ".task",
    "train_vanilla_mdlm": ".teacher",
    "D3LLMError": ".errors",
    "D3LLMConfigError": ".errors",
    "NotBidirectionalError": ".errors",
    "NFECapError": ".errors",
    "TrajectoryAlignmentError": ".errors",
}

__all__ = ["METHOD", "__version__", *_LAZY]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
