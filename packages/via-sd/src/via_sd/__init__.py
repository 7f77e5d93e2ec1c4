"""via-sd: VIA-SD, three-tier speculative decoding with a training-free slim verifier carved
out of the target by layer skipping (Xian et al., ICML 2026).

Importing this package does not import torch; the public names load lazily.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from llmcore.lazy import lazy_exports
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
    "ViaSDConfig": ".config",
    "SlimVerifier": ".slim",
    "layer_mask_even": ".slim",
    "layer_mask_random": ".slim",
    "load_mask": ".slim",
    "find_layers": ".slim",
    "dimr_search": ".mask_search",
    "kl_margin_cost": ".mask_search",
    "MaskSearchResult": ".mask_search",
    "autoregressive_generate": ".decoding",
    "speculative_generate": ".decoding",
    "via_sd_generate": ".decoding",
    "hf_assisted_generate": ".baselines",
    "GenerationResult": ".stats",
    "DecodeStats": ".stats",
    "ForwardCounter": ".stats",
    "Drafter": ".drafters",
    "ModelDrafter": ".drafters",
    "PromptLookupDrafter": ".drafters",
    "EarlyExitDrafter": ".drafters",
    "run_bench": ".bench",
    "ViaSDError": ".errors",
    "ViaSDConfigError": ".errors",
    "ViaSDInputError": ".errors",
    "ViaSDTypeError": ".errors",
    "UnsupportedModelError": ".errors",
    "NonFiniteLogitsError": ".errors",
}

__all__ = ["METHOD", "__version__", "theory", *_LAZY]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, submodules=("theory",))
