"""via-sd: VIA-SD, three-tier speculative decoding with a training-free slim verifier carved
out of the target by layer skipping (Xian et al., ICML 2026).

Importing this package does not import torch; the public names load lazily.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from llmcore.registry import MethodInfo

try:
    __version__ = version("via-sd")
except PackageNotFoundError:  # pragma: no cover
    __version__ = "0.0.0"

METHOD = MethodInfo(
    name="via-sd",
    paper="VIA-SD: Verification via Intra-Model Routing for Speculative Decoding (ICML 2026)",
    summary="accept / slim-verifier regeneration / full verification, by draft confidence",
    demo="via_sd.demo:run",
    package="via-sd",
    tags=("decoding", "speculative"),
)

_LAZY = {
    "ViaSDConfig": "via_sd.config",
    "SlimVerifier": "via_sd.slim",
    "layer_mask_even": "via_sd.slim",
    "layer_mask_random": "via_sd.slim",
    "load_mask": "via_sd.slim",
    "find_layers": "via_sd.slim",
    "dimr_search": "via_sd.mask_search",
    "kl_margin_cost": "via_sd.mask_search",
    "MaskSearchResult": "via_sd.mask_search",
    "autoregressive_generate": "via_sd.decoding",
    "speculative_generate": "via_sd.decoding",
    "via_sd_generate": "via_sd.decoding",
    "hf_assisted_generate": "via_sd.baselines",
    "GenerationResult": "via_sd.stats",
    "DecodeStats": "via_sd.stats",
    "ForwardCounter": "via_sd.stats",
    "Drafter": "via_sd.drafters",
    "ModelDrafter": "via_sd.drafters",
    "PromptLookupDrafter": "via_sd.drafters",
    "EarlyExitDrafter": "via_sd.drafters",
    "run_bench": "via_sd.bench",
    "theory": "via_sd.theory",
    "ViaSDError": "via_sd.errors",
    "ViaSDConfigError": "via_sd.errors",
    "ViaSDInputError": "via_sd.errors",
    "ViaSDTypeError": "via_sd.errors",
    "UnsupportedModelError": "via_sd.errors",
    "NonFiniteLogitsError": "via_sd.errors",
}

__all__ = ["METHOD", "__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'via_sd' has no attribute {name!r}")
    module = importlib.import_module(mod)
    return module if name == "theory" else getattr(module, name)
