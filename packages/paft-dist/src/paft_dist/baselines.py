"""Baselines the paper (and its reviewers) compare against (the `compare` command).

- fault-free DDP, noisy DDP (DSGD under gradient inconsistency, paper Def. 2.1)
- noisy DDP + gradient clipping (reviewer-requested)
- DDP + torch's PeriodicModelAverager (== PAFT-Sync for SGD; mode 'averager' of the trainer)
"""

from __future__ import annotations

from dataclasses import replace

from paft_dist.config import ExperimentConfig, PAFTConfig


def compare_configs(
    base: ExperimentConfig, sync_hs: tuple[int, ...] = (1, 10, 50), grad_clip: float = 1.0
) -> dict[str, ExperimentConfig]:
    """The `compare` sweep on one seed/fault schedule: name -> config."""
    ddp = PAFTConfig(mode="ddp")
    out = {
        "fault-free DDP": replace(base, faults=[], paft=ddp, grad_clip=None),
        "noisy DDP": replace(base, paft=ddp, grad_clip=None),
        f"noisy DDP + clip {grad_clip:g}": replace(base, paft=ddp, grad_clip=grad_clip),
    }
    for h in sync_hs:
        out[f"PAFT-Sync H={h}"] = replace(
            base,
            paft=replace(
                base.paft if base.paft.mode != "ddp" else PAFTConfig(), mode="sync", sync_every=h
            ),
        )
    out["PAFT-Dyn"] = replace(
        base, paft=replace(base.paft if base.paft.mode != "ddp" else PAFTConfig(), mode="dyn")
    )
    return out
