"""``llmcore demo excess-dl``: the analytic learners, then elicit vs teach on a demo-size base."""

from __future__ import annotations

import random
import time
from typing import Any


def run() -> dict[str, Any]:
    """Exact EDL of the analytic learners, then online EDL of elicit vs teach (n = 32) on a
    demo-size toy base (built in well under a minute, then cached)."""
    import torch

    from excess_dl.analysis import bits_to_target
    from excess_dl.analytic import DirichletCategorical, KTBernoulli, SecretXorRule
    from excess_dl.config import EDLConfig
    from excess_dl.edl import compute_edl
    from excess_dl.toy import DEMO_BASE, CipherSuite, build_toy_base

    t0 = time.perf_counter()
    out: dict[str, Any] = {
        "xor_rule_k8_edl_bits": SecretXorRule(8).edl(16, random.Random(0)),
        "kt_bernoulli_edl_n1024": round(KTBernoulli(0.3).expected_edl(1024, seeds=50), 2),
        "random_labels_K10_edl_n256": round(DirichletCategorical(10).expected_edl(256, 20), 2),
    }
    suite = CipherSuite(test_size=100)
    with torch.random.fork_rng(devices=[]):
        model, tok = build_toy_base(suite, DEMO_BASE).load()
        cfg = EDLConfig(checkpoints=[1, 2, 4, 8, 16, 32], accuracy=False)
        for task in ("elicit", "teach"):
            train = suite.task_examples(task, 32, random.Random(0))
            curve = compute_edl(model, train, suite.test_examples(task), cfg, tok, task=task)
            out[f"{task}_edl_bits_n32"] = round(curve.points[-1].edl_bits, 1)
            out[f"{task}_loss_gap_closed_n32"] = round(curve.points[-1].loss_gap_closed, 3)
            out[f"{task}_B(0.8)"] = round(bits_to_target(curve, 0.8), 1)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out
