"""respin-quant: ReSpinQuant (ICML 2026) and rotation-PTQ baselines, simulated in PyTorch.

Importing this package does not import torch; the public API below resolves lazily.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from llmcore.lazy import lazy_exports
from llmcore.registry import MethodInfo

try:
    __version__ = version("respin-quant")
except PackageNotFoundError:  # pragma: no cover - source tree without install
    __version__ = "0.2.0"

METHOD = MethodInfo(
    name="respin-quant",
    paper=(
        "ReSpinQuant: Efficient Layer-Wise LLM Quantization via Subspace Residual Rotation "
        "Approximation (ICML 2026)"
    ),
    summary=(
        "layer-wise learned rotations fused offline, with a rank-r orthogonal correction of the "
        "residual basis change; W4A4/W3A3 simulated PTQ vs RTN, QuaRot and SpinQuant"
    ),
    demo="respin_quant.demo:run",
    tags=("quantization", "rotation", "ptq"),
)

_LAZY = {
    "QuantConfig": "respin_quant.config",
    "RotationConfig": "respin_quant.config",
    "RotationSet": "respin_quant.rotation",
    "fuse_norms": "respin_quant.rotation",
    "init_rotations": "respin_quant.rotation",
    "approximate_transition": "respin_quant.rotation",
    "apply_rotations": "respin_quant.rotation",
    "random_hadamard": "respin_quant.hadamard",
    "hadamard_transform": "respin_quant.hadamard",
    "learn_rotations": "respin_quant.learn",
    "quantize": "respin_quant.ptq",
    "quantize_pipeline": "respin_quant.pipeline",
    "save_quantized": "respin_quant.pipeline",
    "load_quantized": "respin_quant.pipeline",
    "perplexity": "respin_quant.evaluate",
    "CompareConfig": "respin_quant.config",
    "compare": "respin_quant.compare",
    "pack_bits": "respin_quant.packing",
    "unpack_bits": "respin_quant.packing",
    "max_abs_logit_diff": "respin_quant.evaluate",
    "exact_norms": "respin_quant.arch",
    "SUPPORTED_MODEL_TYPES": "respin_quant.arch",
    "RespinError": "respin_quant.errors",
    "RespinConfigError": "respin_quant.errors",
    "UnsupportedModelError": "respin_quant.errors",
    "RotationError": "respin_quant.errors",
    "CalibrationDataError": "respin_quant.errors",
}

__all__ = ["METHOD", "__version__", *sorted(_LAZY)]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
