"""excess-dl: excess description length, the bits fine-tuning writes into a model.

EDL_A(D) = MDL_A(D) - n L(theta_n): the prequential code of the training labels beyond what the
final model needs ("Bits That Count", ICML 2026; Donoway et al., arXiv 2601.04728).
Importing this package does not import torch; the public names load lazily.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from llmcore.lazy import lazy_exports
from llmcore.registry import MethodInfo

try:
    __version__ = version("excess-dl")
except PackageNotFoundError:  # pragma: no cover
    __version__ = "0.0.0"

METHOD = MethodInfo(
    name="excess-dl",
    paper="Bits That Count: Quantifying and Predicting Capabilities of Language Models (ICML 2026)",
    summary="prequential excess description length: bits to elicit vs teach a capability",
    demo="excess_dl.demo:run",
    package="excess-dl",
    tags=("information-theory", "fine-tuning", "elicitation", "lora"),
)

_LAZY = {
    "EDLConfig": ".config",
    "parse_method_spec": ".config",
    "EDLCurve": ".curve",
    "EDLPoint": ".curve",
    "compute_edl": ".edl",
    "edl_sweep": ".edl",
    "finetune": ".edl",
    "default_checkpoints": ".edl",
    "block_boundaries": ".edl",
    "code_lengths": ".scoring",
    "bits_to_target": ".analysis",
    "n_to_target": ".analysis",
    "teach_elicit_ratio": ".analysis",
    "fit_capacity": ".analysis",
    "CapacityFit": ".analysis",
    "lora_underperforms": ".analysis",
    "info_performance_table": ".analysis",
    "sdl": ".analysis",
    "sdl_epsilon": ".analysis",
    "EDLError": ".errors",
    "EDLConfigError": ".errors",
    "EDLInputError": ".errors",
    "NumericalError": ".errors",
}

__all__ = ["METHOD", "__version__", "analytic", "toy", *_LAZY]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, submodules=("analytic", "toy"))
