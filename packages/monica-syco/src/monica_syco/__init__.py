"""monica-syco: MONICA, step-level monitoring of chain-of-thought sycophancy with a drift score
over hidden states and monitor-guided calibration inside one ``generate`` call (Hu et al.,
ICML 2026; a reconstruction from the paper's abstract).

Importing this package does not import torch; the public names load lazily.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from llmcore.lazy import lazy_exports
from llmcore.registry import MethodInfo

try:
    __version__ = version("monica-syco")
except PackageNotFoundError:  # pragma: no cover
    __version__ = "0.0.0"

METHOD = MethodInfo(
    name="monica-syco",
    paper=(
        "MONICA: Real-Time Monitoring and Calibration of Chain-of-Thought Sycophancy in "
        "Large Reasoning Models (ICML 2026)"
    ),
    summary="per-step sycophancy drift score from hidden states; steer when it crosses tau",
    demo="monica_syco.demo:run",
    package="monica-syco",
    tags=("sycophancy", "steering", "monitoring", "reasoning"),
)

_LAZY = {
    "SycItem": ".items",
    "load_items": ".items",
    "save_items": ".items",
    "convert_sycophancy_eval": ".items",
    "convert_anthropic_sycophancy": ".items",
    "final_answer": ".items",
    "DEFAULT_CUE_MIX": ".world",
    "SyntheticWorld": ".world",
    "make_synthetic_world": ".world",
    "TinyModelConfig": ".world",
    "build_tiny_model": ".world",
    "tiny_model_recipe": ".world",
    "StepSegmenter": ".segment",
    "Probe": ".probes",
    "LogisticProbe": ".probes",
    "DiffMeanProbe": ".probes",
    "SycophancyMonitor": ".monitor",
    "StepScorer": ".monitor",
    "RuleStepScorer": ".monitor",
    "LLMStepScorer": ".monitor",
    "model_fingerprint": ".monitor",
    "Calibrator": ".calibrator",
    "attach": ".generate",
    "monica_generate": ".generate",
    "MonicaOutput": ".generate",
    "MonicaSession": ".generate",
    "score_trajectory": ".generate",
    "StepDataset": ".collect",
    "collect_steps": ".collect",
    "fit_monitor": ".collect",
    "fit_calibrator": ".collect",
    "evaluate": ".evaluate",
    "SycReport": ".evaluate",
    "choose_alpha_max": ".evaluate",
    "MonicaError": ".errors",
    "MonicaConfigError": ".errors",
    "MonicaDataError": ".errors",
    "NotFittedError": ".errors",
    "MismatchError": ".errors",
}

__all__ = ["METHOD", "__version__", *_LAZY]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
