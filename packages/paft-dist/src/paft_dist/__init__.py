"""paft-dist: PAFT, fault-tolerant data-parallel training against silent gradient-aggregation
corruption (PAFT-Sync / PAFT-Dyn, seeded fault injector, replica-divergence monitor).

Importing this package does not import torch; the public names load lazily.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from llmcore.lazy import lazy_exports
from llmcore.registry import MethodInfo

try:
    __version__ = version("paft-dist")
except PackageNotFoundError:  # pragma: no cover
    __version__ = "0.0.0"

METHOD = MethodInfo(
    name="paft-dist",
    paper="PAFT: Capturing and Mitigating Gradient Aggregation Errors for Fault-Tolerant "
    "Distributed Training (ICML 2026)",
    summary="periodic / dynamic replica sync against silent gradient-aggregation corruption",
    demo="paft_dist.demo:run",
    package="paft-dist",
    tags=("distributed", "fault-tolerance", "training"),
)

_EXPORTS = {
    "PAFTConfig": ".config",
    "FaultSpec": ".config",
    "ExperimentConfig": ".config",
    "PAFT": ".paft",
    "SyncEvent": ".paft",
    "FaultInjector": ".faults",
    "FaultEvent": ".faults",
    "parameter_divergence": ".monitor",
    "check_replicas": ".monitor",
    "tensor_fingerprint": ".monitor",
    "predicted_divergence": ".monitor",
    "DivergenceStats": ".monitor",
    "ReplicaReport": ".monitor",
    "run_experiment": ".trainer",
    "run_experiments": ".trainer",
    "ExperimentResult": ".trainer",
    "save_checkpoint": ".checkpoint",
    "load_checkpoint": ".checkpoint",
    "PAFTError": ".errors",
    "PAFTConfigError": ".errors",
    "FaultSpecError": ".errors",
    "UnsupportedOptimizerError": ".errors",
    "ReplicaCorruptionError": ".errors",
    "ReplicaMismatchError": ".errors",
    "DistributedSetupError": ".errors",
    "CheckpointError": ".errors",
}

__all__ = ["METHOD", "__version__", *_EXPORTS]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
