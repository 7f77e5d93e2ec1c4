"""sink-probe: attention sinks, massive activations and token mixing, measured and intervened on.

Streaming per-layer measurement of sink rate and mass (Gu et al. 2025), massive activations
(Sun et al. 2024) and token-mixing metrics on any Hugging Face decoder loaded with eager
attention; training-time architectural variants for Llama/Qwen2 (learned key/value bias slot,
output gate, head norms, zeroed sink value, clamped sink residual) and inference-time hooks on
any model.

Importing this package does not import torch; the public names load lazily.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from llmcore.lazy import lazy_exports
from llmcore.registry import MethodInfo

try:
    __version__ = version("sink-probe")
except PackageNotFoundError:  # pragma: no cover
    __version__ = "0.0.0"

METHOD = MethodInfo(
    name="sink-probe",
    paper="Attention sinks and massive activations jointly prevent excessive token mixing "
    "(ICML 2026)",
    summary="streaming sink-rate / massive-activation / token-mixing probe + sink interventions",
    demo="sink_probe.demo:run",
    package="sink-probe",
    tags=("interpretability", "attention-sinks", "massive-activations"),
)

_LAZY = {
    "sink_rate": ".metrics",
    "sink_importance": ".metrics",
    "sink_mass": ".metrics",
    "detect_massive": ".metrics",
    "MassiveEntry": ".metrics",
    "massive_stats": ".metrics",
    "mixing_metrics": ".metrics",
    "probe": ".probe",
    "ProbeReport": ".probe",
    "detect_sinks": ".probe",
    "encode_texts": ".probe",
    "check_bos": ".probe",
    "InterventionConfig": ".kv_bias",
    "patch_model": ".kv_bias",
    "register": ".kv_bias",
    "config_of": ".kv_bias",
    "clip_stats": ".patch",
    "intervene": ".intervene",
    "massive_means": ".intervene",
    "VariantSpec": ".variants",
    "VARIANTS": ".variants",
    "train_variant": ".variants",
    "train_tiny": ".variants",
    "stream_texts": ".data",
    "read_texts": ".data",
    "from_transformer_lens": ".adapters",
    "from_nnsight": ".adapters",
    "SinkProbeError": ".errors",
    "SinkProbeConfigError": ".errors",
    "SinkProbeInputError": ".errors",
    "AttentionMapsUnavailable": ".errors",
    "UnsupportedArchitecture": ".errors",
}

__all__ = ["METHOD", "__version__", *_LAZY]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
