"""Wall-clock ratios of the learners against plain fine-tuning with the same steps
(``nox -s "perf(package='excess-dl')"``, never in parallel lanes)."""

from __future__ import annotations

import random
import time

import pytest
from excess_dl import EDLConfig, compute_edl
from excess_dl.bench import _plain_loop

pytestmark = pytest.mark.perf


def _best(fn, k=2):
    out = []
    for _ in range(k):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out)


def test_learner_overheads(suite, toy_base):
    """online <= 1.6x the plain loop (9 checkpoints, |T| = 300, accuracy off); single-pass
    without its test evaluations <= 1.1x (reused loss) and <= 1.5x (extra eval forward)."""
    model, tok = toy_base
    rows = suite.task_examples("teach", 256, random.Random(0))
    test = suite.test_examples("teach")
    on = EDLConfig(accuracy=False)
    plain = _best(lambda: _plain_loop(model, tok, rows, on, online=True), 1)
    online = _best(lambda: compute_edl(model, rows, test, on, tok), 1)
    print(f"online {online:.2f} s vs plain {plain:.2f} s: {online / plain:.2f}x")
    assert online / plain <= 1.6
    epoch = _best(
        lambda: _plain_loop(model, tok, rows, EDLConfig(mode="single_pass"), online=False)
    )
    for eval_forward, limit in ((False, 1.1), (True, 1.5)):
        cfg = EDLConfig(
            mode="single_pass", eval_forward=eval_forward, accuracy=False, checkpoints=[256]
        )
        c = compute_edl(model, rows, test, cfg, tok)
        own = c.timings["training"] + c.timings["coding"]
        print(f"single-pass eval_forward={eval_forward}: {own:.3f} s vs epoch {epoch:.3f} s")
        assert own / epoch <= limit
