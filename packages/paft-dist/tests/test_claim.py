"""The paper's claim (spec §6.1) on 2 gloo ranks, for SGD, SGD-momentum and Adam.

Margins from the issue: noisy DDP worst-rank test loss >= fault-free + 0.15; PAFT-Sync (H=10) and
PAFT-Dyn <= fault-free + 0.05; replica divergence exactly 0 right after every sync.

Calibration (spec §6 was calibrated on 4 ranks; with M = 2 the noise left on the mean, sigma^2/M,
is twice as large, so sigma was re-chosen per optimizer, never the margins). Measured on this
setup, worst-rank test loss:
  SGD lr 0.05, 600 steps, sigma 0.1: fault-free 0.563, noisy DDP 0.781, PAFT-Sync 0.587,
    PAFT-Dyn 0.588.
  momentum 0.9 lr 0.01, 600 steps: sigma 0.1 gave noisy DDP 0.853 but PAFT-Sync 0.424 against
    fault-free 0.336 (+0.088: the noise left on the mean); sigma 0.06: noisy 0.575, PAFT-Sync 0.363.
  Adam lr 3e-3: Adam's second moment absorbs the noise, which slows the mean model too, so the
    gap between replicas and mean needs more steps to open. 600 steps, sigma 0.03: noisy +0.164,
    PAFT-Sync +0.097; 1200 steps, sigma 0.04: +0.164 / +0.052; 2000 steps, sigma 0.04: +0.147 /
    +0.024; chosen 2000 steps, sigma 0.05: fault-free 0.239, noisy 0.411 (+0.172), PAFT-Sync
    0.276 (+0.038), PAFT-Dyn 0.276.

Measured margins (claim value minus threshold; noisy DDP gap minus 0.15, then 0.05 minus the
PAFT-Sync / PAFT-Dyn gaps): SGD 0.068 / 0.026 / 0.026; momentum 0.088 / 0.023 / 0.023; Adam
(extended tier) 0.022 / 0.012 / 0.013. No cached fixture is involved (each run is computed in
the session, one thread per rank), so there is no spread between fixture builds.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.claim

#: SGD and momentum run in the default tier; Adam (4 x 2,000 steps) in the extended tier.
OPTIMIZERS = ["sgd", "momentum", pytest.param("adam", marks=pytest.mark.extended)]


def _runs(request: pytest.FixtureRequest, opt: str) -> dict:
    return request.getfixturevalue("runs_adam" if opt == "adam" else "runs")


@pytest.mark.parametrize("opt", OPTIMIZERS)
def test_paft_recovers_what_noisy_ddp_loses(request: pytest.FixtureRequest, opt: str) -> None:
    runs = _runs(request, opt)
    ff = runs[f"{opt}_ff"].worst_test_loss
    noisy = runs[f"{opt}_noisy"].worst_test_loss
    sync = runs[f"{opt}_sync"].worst_test_loss
    dyn = runs[f"{opt}_dyn"].worst_test_loss
    print(
        f"{opt}: fault-free {ff:.4f} noisy DDP {noisy:.4f} PAFT-Sync {sync:.4f} PAFT-Dyn {dyn:.4f}"
    )
    assert noisy >= ff + 0.15
    assert sync <= ff + 0.05
    assert dyn <= ff + 0.05


@pytest.mark.parametrize("opt", OPTIMIZERS)
@pytest.mark.parametrize("mode", ["sync", "dyn"])
def test_divergence_exactly_zero_after_every_sync(
    request: pytest.FixtureRequest, opt: str, mode: str
) -> None:
    runs = _runs(request, opt)
    r = runs[f"{opt}_{mode}"]
    after = r.summary["after_sync_divergence"]
    assert len(after) == r.summary["syncs"] > 0
    assert all(d == 0.0 for d in after)
    assert runs[f"{opt}_noisy"].summary["final_divergence"] > 0.5
