"""circuitprint: non-invasive LLM fingerprints from internal circuits.

The owner finds mechanistically essential supernodes of the protected model (attribution
patching on MLP neurons, attention heads or transcoder features), turns each supernode's
suppression into ordinary trigger prompts that shift the answer in a distinctive way, and
verifies a suspect black-box from its answers to the clean prompts and the triggers
(trigger match rate, binomial test). The protected weights are never modified.

Importing this package does not import torch; the public names load lazily.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from llmcore.lazy import lazy_exports
from llmcore.registry import MethodInfo

try:
    __version__ = version("circuitprint")
except PackageNotFoundError:  # pragma: no cover
    __version__ = "0.0.0"

METHOD = MethodInfo(
    name="circuitprint",
    paper="CircuitPrint: Mechanistic Circuit Fingerprints for Large Language Models (ICML 2026)",
    summary="essential supernodes -> suppression-replicating trigger prompts -> black-box TMR test",
    demo="circuitprint.demo:run",
    package="circuitprint",
    tags=("fingerprinting", "interpretability", "circuits", "model-provenance"),
)

_LAZY = {
    "NodeSpec": ".nodes",
    "GatedModel": ".nodes",
    "GateRule": ".nodes",
    "Transcoder": ".nodes",
    "ProbeSet": ".probes",
    "ProbeItem": ".probes",
    "AttributionTable": ".circuits",
    "attribute": ".circuits",
    "activation_patching": ".circuits",
    "discover_circuits": ".circuits",
    "faithfulness": ".circuits",
    "find_supernodes": ".circuits",
    "Supernode": ".circuits",
    "suppress": ".circuits",
    "essentiality": ".circuits",
    "TriggerConfig": ".config",
    "VerifyConfig": ".config",
    "Signature": ".triggers",
    "synthesize_triggers": ".triggers",
    "DiscoverConfig": ".config",
    "discover": ".pipeline",
    "build_signature": ".pipeline",
    "cached_signature": ".pipeline",
    "Suspect": ".verify",
    "HFSuspect": ".verify",
    "VLLMSuspect": ".verify",
    "OpenAICompatSuspect": ".verify",
    "Verdict": ".verify",
    "verify": ".verify",
    "binomial_p": ".verify",
    "finetune": ".transforms",
    "lora_finetune": ".transforms",
    "merge_linear": ".transforms",
    "merge_task_arithmetic": ".transforms",
    "merge_ties": ".transforms",
    "mergekit_config": ".transforms",
    "run_mergekit": ".transforms",
    "quantize_int8": ".transforms",
    "prune_magnitude": ".transforms",
    "permute_neurons": ".transforms",
    "pcs": ".baselines",
    "huref_ics": ".baselines",
    "reef_cka": ".baselines",
    "output_agreement": ".baselines",
    "InstructionalFingerprint": ".baselines",
    "CircuitPrintError": ".errors",
    "UnsupportedModelError": ".errors",
    "ProbeError": ".errors",
    "SignatureError": ".errors",
    "VerificationError": ".errors",
    "MergeError": ".errors",
}

__all__ = ["METHOD", "__version__", *_LAZY]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
