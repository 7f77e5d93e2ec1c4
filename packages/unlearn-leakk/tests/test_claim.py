"""The paper's claim on the fictitious-author world, 3 seeds (issue 5 recipe and margins).

Calibration written down here (issue 5, from a prototype and from this package's own runs):
GradDiff, forget authors whose attribute values no retain author shares, pre-training until
every forget fact is answered greedily, a greedy-forget stop checked after every step. The
learning rate is 3e-5 rather than 1e-5: at 1e-5 the same stop needs ~3x the steps (over 10
minutes per seed on the 2 shared CPU cores), beyond the test budget; the direction is the same.

Asserted (issue 5): after the stop (greedy forget accuracy <= 10 %), leak@16 >= 0.15,
>= 1.5 x the greedy leak, and above chance@16 (the same statistic for a random wrong value of
the same attribute on the same samples); RULE gives leak@16 <= 0.5 x the baseline's with greedy
retain accuracy within 0.15 of the baseline's. The compute-matched control is run beside RULE
and only reported (in the prototype it tied with RULE at this scale).
"""

from __future__ import annotations

import itertools
import json

import pytest
from unlearn_leakk.experiment import WorldConfig, run_world

pytestmark = [pytest.mark.claim, pytest.mark.slow]


@pytest.fixture(scope="module", params=[0, 1, 2], ids=lambda s: f"seed{s}")
def result(request, world_entry):
    r = run_world(WorldConfig(seed=request.param))
    print(json.dumps({k: v for k, v in r.items() if "counts" not in k}, default=str))
    return r


def test_greedy_says_forgotten_but_sampling_leaks(result):
    r = result
    assert r["base_stopped"], "the greedy stop never fired"
    greedy = r["baseline_greedy_forget_acc"]
    assert greedy <= 0.10
    leak16 = r["baseline_leak@16"]
    assert leak16 >= 0.15
    assert leak16 >= 1.5 * greedy
    assert leak16 > r["baseline_chance@16"]
    curve = [r[f"baseline_leak@{k}"] for k in (1, 2, 4, 8, 16, 32)]
    assert all(b >= a - 1e-12 for a, b in itertools.pairwise(curve))


def test_rule_cuts_leak_at_k_and_keeps_retain(result):
    r = result
    assert r["rule_leak@16"] <= 0.5 * r["baseline_leak@16"]
    assert r["rule_greedy_retain_acc"] >= r["baseline_greedy_retain_acc"] - 0.15
    # reported, not asserted: the compute-matched control (same extra steps, no mined samples)
    print(
        f"seed {r['seed']}: leak@16 baseline {r['baseline_leak@16']:.3f} "
        f"RULE {r['rule_leak@16']:.3f} control {r['control_leak@16']:.3f}; retain acc "
        f"baseline {r['baseline_greedy_retain_acc']:.3f} RULE {r['rule_greedy_retain_acc']:.3f} "
        f"control {r['control_greedy_retain_acc']:.3f}"
    )
