"""`llmcore demo paft-dist`: 2 gloo processes on CPU, Gaussian aggregation noise, DDP vs PAFT."""

from __future__ import annotations

from typing import Any


def run() -> dict[str, Any]:
    """Fault-free DDP, noisy DDP and PAFT-Sync (H=10) on the synthetic teacher task."""
    from paft_dist.config import ExperimentConfig, FaultSpec, PAFTConfig
    from paft_dist.trainer import run_experiments

    noise = [FaultSpec(kind="gaussian", sigma=0.1)]
    cfgs = [
        ExperimentConfig(steps=600),
        ExperimentConfig(steps=600, faults=noise),
        ExperimentConfig(steps=600, faults=noise, paft=PAFTConfig(mode="sync", sync_every=10)),
    ]
    ff, noisy, paft = (r.summary for r in run_experiments(cfgs))
    return {
        "world_size": 2,
        "fault": "gaussian sigma=0.1, all ranks, every step",
        "fault_free_worst_loss": round(max(ff["test_loss"]), 4),
        "noisy_ddp_worst_loss": round(max(noisy["test_loss"]), 4),
        "paft_sync10_worst_loss": round(max(paft["test_loss"]), 4),
        "noisy_ddp_divergence": round(noisy["final_divergence"], 4),
        "paft_divergence": paft["final_divergence"],
        "paft_bytes_sync_over_grad": paft["sync_ratio"],
    }
