"""The paper's direction on the toy organism: eliciting a latent capability costs far fewer
bits than teaching a new one, and a 256-parameter adapter fails where capacity runs out.

All curves use the online learner with its defaults (R = 2 replay steps, B = 16, AdamW
lr 1e-3 full / 1e-2 LoRA, constant lr), n = 256, one run each, computed once per test session
(``curves`` fixture) and shared by the assertions.

Calibration on the zoo-built base (word tokenizer, warm-up + cosine pretraining, 83,968
parameters, gates: '>' exact match 1.00, '=' tasks 0.00), one thread, 2026-12-01:

| curve | n=2 | n=4 | n=16 | n=32 | n=256 |
|---|---|---|---|---|---|
| elicit, full: EDL / G / acc | 23 / 0.85 / 0.29 | 33 / 0.94 / 0.63 | 47 / 0.99 / 0.92 | 52 / 1.00 / 1.00 | 58 / 1.00 / 1.00 |
| teach, full | 16 / 0.26 / 0.00 | 41 / 0.35 / 0.00 | 205 / 0.73 / 0.07 | 435 / 0.95 / 0.61 | 555 / 1.00 / 1.00 |
| elicit, LoRA r=1 v_proj (256 params) | -5 / 0.17 / 0.00 | 76 / 0.91 / 0.39 | 94 / 0.99 / 0.99 | 99 / 0.99 / 1.00 | 102 / 1.00 / 1.00 |
| table, full: EDL / acc | | | 87 / 0.03 | 105 / 0.02 | 669 / 0.12 |
| table, LoRA r=1 v_proj: acc | | | 0.00 | 0.00 | 0.02 (test 7.9 bits/example) |

Headline ratios: B_teach(0.8)/B_elicit(0.8) on G = 435/23 = 19 (threshold 4); on accuracy
tau = 0.5: 435/33 = 13 (threshold 4). Elicit reaches G >= 0.8 at n = 2; teach at n = 32 (G = 0.73
at n = 16: the margin of "teach needs n >= 32" is 0.07 in G). Random labels after warming the
base on 256 other random-label examples: EDL(256) = -103 bits (|EDL| <= 0.25 x 555 = 139);
that claim costs two more 256-example runs and lives in the extended tier to keep this tier
under 3 minutes.

Not reproduced here: full FT on ``table`` reaches only 0.12 accuracy at n = 256 on this base
(a character-level reference base of the same size reached 0.95 in our earlier calibration), so "full FT >= 0.9 on table at n = 256" is not
asserted; the n = 1024 form runs in the extended tier (``test_extended.py``).
"""

from __future__ import annotations

import random

import pytest
from excess_dl import EDLConfig, bits_to_target, compute_edl, n_to_target

pytestmark = [pytest.mark.claim, pytest.mark.slow]

N = 256
LORA = {"r": 1, "target_modules": ["v_proj"]}


class _Curves:
    """Lazily computed, shared curves (each at most once per session)."""

    def __init__(self, suite, base):
        self.suite = suite
        self.model, self.tok = base
        self._cache: dict = {}

    def get(self, task: str, method: str = "full"):
        key = (task, method)
        if key not in self._cache:
            cfg = EDLConfig(method=method, lora=LORA, allow_overlap=task == "table")
            train = self.suite.task_examples(task, N, random.Random(0))
            test = self.suite.test_examples(task)
            self._cache[key] = compute_edl(self.model, train, test, cfg, self.tok, task=task)
            c = self._cache[key]
            print(
                f"\n{task}/{c.method}: "
                + ", ".join(
                    f"n={p.n}: {p.edl_bits:.0f} b G={p.loss_gap_closed:.2f} acc={p.accuracy:.2f}"
                    for p in c.points
                )
            )
        return self._cache[key]


@pytest.fixture(scope="module")
def curves(suite, toy_base):
    return _Curves(suite, toy_base)


def test_base_is_locked(curves):
    """The '=' prompts start at chance: the capability is latent (base accuracy 0)."""
    for task in ("elicit", "teach"):
        assert curves.get(task).points[0].accuracy_base <= 0.05


def test_elicitation_needs_far_fewer_bits_than_teaching(curves):
    elicit, teach = curves.get("elicit"), curves.get("teach")
    b_e, b_t = bits_to_target(elicit, 0.8), bits_to_target(teach, 0.8)
    a_e, a_t = bits_to_target(elicit, 0.5, "accuracy"), bits_to_target(teach, 0.5, "accuracy")
    print(f"B(0.8) G: teach {b_t:.0f} / elicit {b_e:.0f}; B(0.5) acc: {a_t:.0f} / {a_e:.0f}")
    assert 0 < b_e < b_t and 0 < a_e < a_t
    assert b_t / b_e >= 4
    assert a_t / a_e >= 4
    assert n_to_target(elicit, 0.8) <= 8
    assert n_to_target(teach, 0.8) >= 32


def test_lora_matches_full_when_eliciting(curves):
    """A 256-parameter adapter elicits as well as full FT (calibrated 1.00 vs 1.00)."""
    lora, full = curves.get("elicit", "lora"), curves.get("elicit")
    assert lora.trainable_params == 256
    acc_l, acc_f = lora.point(N).accuracy, full.point(N).accuracy
    assert abs(acc_l - acc_f) <= 0.05


def test_lora_fails_on_table(curves):
    """The adapter cannot store the 512-bit table: accuracy <= 0.1 and test loss >= 6
    bits/example (calibrated 0.02 and 7.9 bits/example; full FT: 4.4 bits/example at n = 256,
    0.089 at n = 1024 in the extended tier)."""
    lora = curves.get("table", "lora")
    assert lora.point(N).accuracy <= 0.1
    assert lora.point(N).test_bits_per_example >= 6
