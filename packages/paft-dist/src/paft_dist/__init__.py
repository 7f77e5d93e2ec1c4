"""paft-dist: PAFT, fault-tolerant data-parallel training against silent gradient-aggregation
corruption (PAFT-Sync / PAFT-Dyn, seeded fault injector, replica-divergence monitor).

Importing this package does not import torch; the public names load lazily.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import Any

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

_LAZY = {
    "PAFTConfig": "paft_dist.config",
    "FaultSpec": "paft_dist.config",
    "ExperimentConfig": "paft_dist.config",
    "PAFT": "paft_dist.paft",
    "SyncEvent": "paft_dist.paft",
    "FaultInjector": "paft_dist.faults",
    "FaultEvent": "paft_dist.faults",
    "parameter_divergence": "paft_dist.monitor",
    "check_replicas": "paft_dist.monitor",
    "tensor_fingerprint": "paft_dist.monitor",
    "predicted_divergence": "paft_dist.monitor",
    "DivergenceStats": "paft_dist.monitor",
    "ReplicaReport": "paft_dist.monitor",
    "run_experiment": "paft_dist.trainer",
    "run_experiments": "paft_dist.trainer",
    "ExperimentResult": "paft_dist.trainer",
    "PAFTError": "paft_dist.errors",
    "PAFTConfigError": "paft_dist.errors",
    "FaultSpecError": "paft_dist.errors",
    "UnsupportedOptimizerError": "paft_dist.errors",
    "ReplicaCorruptionError": "paft_dist.errors",
    "ReplicaMismatchError": "paft_dist.errors",
    "DistributedSetupError": "paft_dist.errors",
}

__all__ = ["METHOD", "__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'paft_dist' has no attribute {name!r}")
