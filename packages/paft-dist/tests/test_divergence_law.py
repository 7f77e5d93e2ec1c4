"""The divergence law of noisy DDP and its exact identity."""

from __future__ import annotations

import math

import torch
from paft_dist import FaultInjector, FaultSpec, predicted_divergence
from paft_dist.trainer import MLP_HIDDEN, MLP_IN, MLP_OUT

D = MLP_IN * MLP_HIDDEN + MLP_HIDDEN + MLP_HIDDEN * MLP_OUT + MLP_OUT  # 2762


def test_divergence_within_15_percent_of_theory(runs: dict) -> None:
    r = runs["sgd_noisy"]
    measured = {m["step"]: m["divergence"] for m in r.metrics[0] if "divergence" in m}
    for step in range(100, 601, 50):
        pred = predicted_divergence(D, 0.1, 2, [0.05] * step)
        assert abs(measured[step] - pred) <= 0.15 * pred, (step, measured[step], pred)
    ratio = measured[600] / measured[150]
    assert 1.7 <= ratio <= 2.3  # sqrt(t) growth


def test_exact_identity_replayed_from_injector_seed(runs: dict) -> None:
    r = runs["sgd_noisy"]
    spec = FaultSpec(kind="gaussian", sigma=0.1)
    shapes = [MLP_IN * MLP_HIDDEN, MLP_HIDDEN, MLP_HIDDEN * MLP_OUT, MLP_OUT]
    inj = [FaultInjector([spec], rank=m, world_size=2) for m in (0, 1)]
    pred = torch.zeros(D, dtype=torch.float64)
    for s in range(600):
        parts = [
            torch.cat([inj[m].noise(spec, 0, s, i, n) for i, n in enumerate(shapes)]).double()
            for m in (0, 1)
        ]
        pred -= 0.05 * (parts[0] - parts[1])
    meas = r.final_params(0).double() - r.final_params(1).double()
    err = torch.linalg.vector_norm(meas - pred) / torch.linalg.vector_norm(pred)
    assert err < 1e-4
    assert math.isclose(
        float(torch.linalg.vector_norm(pred)) / 2, r.summary["final_divergence"], rel_tol=1e-4
    )


def test_pre_sync_divergence_bounded_for_paft_sync(runs: dict) -> None:
    ev = runs["sgd_sync"].sync_events
    first = ev[0]["deviation"]
    assert first > 0
    assert max(e["deviation"] for e in ev) <= 1.5 * first
