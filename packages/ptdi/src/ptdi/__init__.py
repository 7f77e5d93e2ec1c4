"""ptdi: provable training data identification (Liu, Zeng, Huang, Wei; ICML 2026).

Membership scores of a language model are turned into conformal p-values against known
non-members, the share of training data in the test set is estimated with a jackknife-corrected
Beta boundary (JKBB) estimator, and Benjamini-Hochberg on the scaled p-values selects a set whose
false identification rate is controlled at a target level.

Importing this package does not import torch; the public names load lazily.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from llmcore.lazy import lazy_exports
from llmcore.registry import MethodInfo

try:
    __version__ = version("ptdi")
except PackageNotFoundError:  # pragma: no cover
    __version__ = "0.0.0"

METHOD = MethodInfo(
    name="ptdi",
    paper="Provable Training Data Identification for Large Language Models (ICML 2026)",
    summary="conformal p-values + JKBB share estimate + scaled BH: member sets with FIR <= alpha",
    demo="ptdi.demo:run",
    package="ptdi",
    tags=("membership-inference", "multiple-testing", "conformal"),
)

_LAZY = {
    "conformal_pvalues": ".stats",
    "jkbb_pi0": ".stats",
    "jkbb_auto_pi0": ".stats",
    "jkbb_weights": ".stats",
    "beta_kernel": ".stats",
    "storey_pi0": ".stats",
    "estimate_pi0": ".stats",
    "bh_select": ".stats",
    "ptdi_select": ".stats",
    "PTDIResult": ".stats",
    "selection_metrics": ".stats",
    "split_protocol": ".stats",
    "evaluate": ".stats",
    "simulate": ".stats",
    "min_calibration_size": ".stats",
    "MembershipScorer": ".scoring",
    "score_logits": ".scoring",
    "PTDIError": ".errors",
    "PTDIConfigError": ".errors",
    "PTDIInputError": ".errors",
    "UnsupportedBackendError": ".errors",
}

__all__ = ["METHOD", "__version__", *_LAZY]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
