"""Extended tier (``nox -s "extended(package='excess-dl')"``): capacity at n = 1024, blockwise
ordering, capacity fit and format control (reported), three seeds. Results are in the README."""

from __future__ import annotations

import math
import random

import pytest
from excess_dl import EDLConfig, bits_to_target, compute_edl, fit_capacity

pytestmark = [pytest.mark.extended, pytest.mark.slow]

LORA = {"r": 1, "target_modules": ["v_proj"]}


def _curve(suite, base, task, n, seed=0, **kw):
    model, tok = base
    cfg = EDLConfig(seed=seed, allow_overlap=task == "table", **kw)
    train = suite.task_examples(task, n, random.Random(seed))
    return compute_edl(model, train, suite.test_examples(task), cfg, tok, task=task)


def test_capacity_predicts_lora_failure_on_table(suite, toy_base):
    """Table at n = 1024: the 256-parameter adapter stays at the label marginal (acc <= 0.1,
    >= 6 bits/example) while full FT memorises the table (acc >= 0.95, <= 0.5 bits/example)."""
    lora = _curve(suite, toy_base, "table", 1024, method="lora", lora=LORA, checkpoints=[1024])
    full = _curve(suite, toy_base, "table", 1024, checkpoints=[1024])
    pl, pf = lora.points[-1], full.points[-1]
    print(
        f"table n=1024: LoRA acc {pl.accuracy:.2f} {pl.test_bits_per_example:.2f} b/ex EDL {pl.edl_bits:.0f}; "
        f"full acc {pf.accuracy:.2f} {pf.test_bits_per_example:.3f} b/ex EDL {pf.edl_bits:.0f}"
    )
    assert pl.accuracy <= 0.1 and pl.test_bits_per_example >= 6
    assert pf.accuracy >= 0.95 and pf.test_bits_per_example <= 0.5


def test_blockwise_same_ordering(suite, toy_base):
    """Blockwise defaults (Voita-Titov boundaries): teaching still costs >= 4x the bits."""
    e = _curve(suite, toy_base, "elicit", 256, mode="blockwise")
    t = _curve(suite, toy_base, "teach", 256, mode="blockwise")
    be, bt = bits_to_target(e, 0.8), bits_to_target(t, 0.8)
    print(f"blockwise B(0.8): elicit {be:.0f}, teach {bt:.0f}")
    assert be > 0 and bt / be >= 4


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_headline_three_seeds(suite, toy_base, seed):
    e = _curve(suite, toy_base, "elicit", 256, seed=seed)
    t = _curve(suite, toy_base, "teach", 256, seed=seed)
    ratio = bits_to_target(t, 0.8) / bits_to_target(e, 0.8)
    print(f"seed {seed}: B_teach/B_elicit = {ratio:.1f}")
    assert ratio >= 4


def test_capacity_fit_reported(suite, toy_base):
    """Reported only: capacity fits with a decaying lr, and the rule B_full(0.8) > C_lora."""
    from excess_dl import lora_underperforms

    for task in ("elicit", "table"):
        lora = _curve(
            suite, toy_base, task, 512, method="lora", lora=LORA, lr_schedule="inverse_sqrt"
        )
        full = _curve(suite, toy_base, task, 512, lr_schedule="inverse_sqrt")
        fit = fit_capacity(lora)
        print(
            f"{task}: C_lora={fit.C_bits:.0f} bits n0={fit.n0:.1f} "
            f"({fit.bits_per_param:.2f} bits/param, r2={fit.r2:.2f}); "
            f"B_full(0.8)={bits_to_target(full, 0.8):.0f}; LoRA predicted to fall short: "
            f"{lora_underperforms(full, fit)}"
        )
        assert math.isfinite(fit.C_bits)


def test_format_control_reported(suite, toy_base):
    """Reported only: random labels on the locked base with the label-shuffled control curve."""
    c = _curve(suite, toy_base, "random_labels", 256, format_control=True, accuracy=False)
    assert c.control is not None
    print(
        f"random labels EDL(256) {c.points[-1].edl_bits:.0f}; control {c.control.points[-1].edl_bits:.0f}"
    )


def test_random_labels_after_warming_carry_few_bits(suite, toy_base):
    """Warm the base on 256 random labels (removes the format transient), then code 256 fresh
    ones: |EDL(256)| <= 0.25 x teach EDL(256) (calibrated -103 vs 555)."""
    from excess_dl import finetune

    model, tok = toy_base
    warm = finetune(
        model, suite.task_examples("random_labels", 256, random.Random(12345)), EDLConfig(), tok
    )
    train = suite.task_examples("random_labels", 256, random.Random(0))
    fresh = compute_edl(warm, train, suite.test_examples("random_labels"), EDLConfig(), tok)
    teach = _curve(suite, toy_base, "teach", 256)
    edl, t = fresh.points[-1].edl_bits, teach.points[-1].edl_bits
    print(f"random labels after warming: EDL(256) = {edl:.0f} bits; teach {t:.0f}")
    assert abs(edl) <= 0.25 * t
