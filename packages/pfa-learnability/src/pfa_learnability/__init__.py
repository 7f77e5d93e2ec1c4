"""pfa-learnability: causal evaluation of sub-task learnability on probabilistic finite automata
(Snæbjarnarson et al., ICML 2026): a binning semiring for exact count-conditioned sampling,
decomposed KL metrics, and correlational vs interventional analyses.

Importing this package does not import torch; the public names load lazily.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from llmcore.lazy import lazy_exports
from llmcore.registry import MethodInfo

try:
    __version__ = version("pfa-learnability")
except PackageNotFoundError:  # pragma: no cover
    __version__ = "0.0.0"

METHOD = MethodInfo(
    name="pfa-learnability",
    paper="Causally Evaluating the Learnability of Formal Language Tasks (ICML 2026)",
    summary="binning-semiring interventions on PFA corpora; decomposed KL; causal vs correlational",
    demo="pfa_learnability.demo:run",
    package="pfa-learnability",
    tags=("formal-languages", "learnability", "causal", "automata"),
)

_LAZY = {
    "PFA": ".pfa",
    "EOS": ".pfa",
    "SampleBatch": ".pfa",
    "BinningSemiring": ".semiring",
    "ArcProperty": ".semiring",
    "SymbolProperty": ".semiring",
    "StateEntryProperty": ".semiring",
    "CustomProperty": ".semiring",
    "parse_property": ".semiring",
    "increments": ".semiring",
    "count_distribution": ".semiring",
    "backward_tables": ".semiring",
    "BackwardTables": ".semiring",
    "Corpus": ".sampling",
    "sample_conditioned": ".sampling",
    "sample_corpus": ".sampling",
    "pushed_pfa": ".sampling",
    "product_automaton": ".sampling",
    "tilt_theta": ".sampling",
    "rejection_sample": ".sampling",
    "read_corpus": ".sampling",
    "KLReport": ".kl",
    "decomposed_kl": ".kl",
    "reference_automaton": ".kl",
    "PFAModel": ".kl",
    "UniformModel": ".kl",
    "AddAlphaStateLearner": ".learners",
    "expected_decision_kl": ".learners",
    "planted_suite": ".analysis",
    "run_correlational": ".analysis",
    "run_interventional": ".analysis",
    "compare": ".analysis",
    "PFALearnabilityError": ".errors",
    "PFAValidationError": ".errors",
    "NonTightAutomatonError": ".errors",
    "PropertyError": ".errors",
    "BinError": ".errors",
    "MaxLengthError": ".errors",
    "VocabularyError": ".errors",
}

__all__ = ["METHOD", "__version__", *_LAZY]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
