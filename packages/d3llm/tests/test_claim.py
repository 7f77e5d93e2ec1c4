"""The paper's headline directions on the calibrated CPU fixture (128 held-out prompts).

Fixture: ``d3llm.tiny`` (copy + running parity, 4 digits, 12 generated positions; teacher
Llama 4 x 64, 1,000 LLaDA-SFT steps, batch 32, lr 3e-3; student: 6 epochs of pseudo-trajectory
distillation on 512 trajectories, progressive blocks 4 -> 8 -> 12, lambda_H = 2, lr 1e-3).
Threshold and multi-block decoding use one block of 12 (the whole generation); the KV-cache
check uses blocks of 4 (three blocks), where there is a finished prefix to cache. Every decode
run is shared across the assertions (multi-block decoding is batch 1).

Calibration (one seed, 128 prompts; tries in order):
1. 6-digit addition, reversed sum, Llama 4 x 128, 600 steps: vanilla accuracy 0.0 (loss 1.76).
2. 6 digits, interleaved digit/parity answer, 4 x 128: 300 steps 0.0; 1,050 steps of a 1,200-step
   run 0.09 (copies 1.0, parity bits at chance).
3. 6 digits, copy block then parity block, 4 x 128, 1,000 steps: 0.08 (parity bits 0.52 = chance).
4. 4 digits with separators, 4 x 64, 1,200 steps, blocks of 4: A_v = 1.000, but the teacher
   commits every block in one forward (entropy 0.000 at every position of the fully masked
   answer; NFE 3 = the number of blocks at every threshold, TPF 2.667, also with one block of 12:
   TPF 8.0, NFE 1.0): no room for distillation. Student (3 epochs, blocks 4/6/8) TPF 1.00 x the
   teacher's, AUP 254.97 < 266.67; KV cache tokens -14 %.
5. 6 digits with separators, 4 x 64, 1,600 steps (lr 3e-3): vanilla 0.06 up to step 1,200,
   0.19 at 1,600: does not reach the gate in budget.
6. 4 digits, 4 x 64, 1,000-step run (checkpoints every 100): vanilla 0.05-0.13 up to step 600,
   0.50 at 700-800, 0.80 at 900, 0.89 at 1,000, where one-block multi-block decoding still
   needs 1.4-1.8 forwards (TPF 5.8 at 0.5, 4.6 at 0.1): accurate one token at a time, not yet
   confident in parallel. This is the fixture teacher (zoo gate: vanilla 0.891).
   Teacher multi-block, blocks of 12, acc / TPF: 0.1 0.906 / 4.49, 0.3 0.906 / 5.39,
   0.5 0.914 / 6.06, 0.8 0.906 / 8.00 (blocks of 4: 0.906 / 2.64 at 0.5, the 3-block cap;
   blocks of 6: 0.922 / 3.61).
   Students at 0.1 / 0.3 / 0.5 / 0.8 (blocks of 12): 3 epochs, blocks 4/6/8: 0.906 / 4.41,
   0.930 / 6.32, 0.930 / 7.31 (1.21 x), 0.883 / 8.00; 6 epochs, blocks 4/8/12 (the fixture):
   0.977 / 7.21, 0.992 / 8.00, 0.992 / 8.00 (1.32 x), 0.992 / 8.00; student vanilla 0.914.
   Blocks of 6: student 0.953 / 3.86 at 0.5 (1.07 x the teacher's 3.61: the 2-block cap is 4).
   KV cache (delay 1, refresh 3), tokens processed per prompt without -> with, accuracy:
   student blocks of 4 at 0.5: 63.0 -> 54.0 (-14.3 %), 0.969 -> 0.969; student one block at 0.5:
   21.0 -> 21.0 (one forward per prompt, nothing to cache); teacher one block at 0.5: -10.4 %,
   0.914 -> 0.883; one token per forward (threshold 0, one block): -26.5 %, the most this
   geometry allows: with refresh every 3 forwards at most 2 of 3 forwards are partial, and a
   partial forward skips the 9 prompt positions of 21 (<= 28.6 %).
AUP (y_max over both): teacher 573.63, student 680.71, vanilla-only 89.06.
Not reached, hence not asserted: the KV cache's >= 30 % cut in tokens processed.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.claim, pytest.mark.slow]

THRESHOLDS = (0.1, 0.3, 0.5, 0.8)
MB = {"block_add_threshold": 0.1, "decoded_token_threshold": 0.95}
KV_BLOCK = 4
"""Blocks of the KV-cache check (three blocks, so finished blocks can join the cached prefix)."""


@pytest.fixture(scope="module")
def runs():
    from d3llm.tiny import (
        build_student,
        build_teacher,
        build_trajectories,
        evaluate,
        load_mdlm_entry,
    )

    t_entry = build_teacher()
    s_entry = build_student(t_entry, build_trajectories(t_entry))
    teacher, tok = load_mdlm_entry(t_entry)
    student, _ = load_mdlm_entry(s_entry)
    out = {"gate": t_entry.metrics["vanilla_accuracy"]}
    for name, m in (("teacher", teacher), ("student", student)):
        out[f"{name}/vanilla"] = evaluate(m, tok, "vanilla")
        for thr in THRESHOLDS:
            out[f"{name}/{thr}"] = evaluate(m, tok, "multiblock", threshold=thr, **MB)
    kv = {"threshold": 0.5, "block_size": KV_BLOCK, **MB}
    out["student/0.5-b4"] = evaluate(student, tok, "multiblock", **kv)
    out["student/0.5-b4-kv"] = evaluate(
        student, tok, "multiblock", use_kv_cache=True, cache_delay_iter=1, refresh_interval=3, **kv
    )
    return out


def test_teacher_gate(runs):
    """Vanilla decoding (one token per forward, one block) of the teacher: A_v >= 0.85, the
    zoo build's gate (measured 0.891); recomputed here equal to the gate's value."""
    a_v = runs["teacher/vanilla"]["accuracy"]
    assert a_v == pytest.approx(runs["gate"])
    assert a_v >= 0.85
    assert runs["teacher/vanilla"]["tpf_positions"] == 1.0


def test_teacher_multiblock_parallel(runs):
    """Teacher multi-block (0.5 / 0.1 / 0.95): TPF >= 1.5 at accuracy >= A_v - 0.05 (measured
    6.06 / 0.914)."""
    a_v = runs["teacher/vanilla"]["accuracy"]
    r = runs["teacher/0.5"]
    assert r["tpf"] >= 1.5
    assert r["accuracy"] >= a_v - 0.05


def test_student_faster_at_same_threshold(runs):
    """Student at the same threshold (0.5): TPF >= 1.2 x the teacher's and >= 2, at accuracy
    >= A_v - 0.05 (measured 8.00 vs 6.06 = 1.32 x, accuracy 0.992)."""
    a_v = runs["teacher/vanilla"]["accuracy"]
    t, s = runs["teacher/0.5"], runs["student/0.5"]
    print(f"student/teacher TPF ratio {s['tpf'] / t['tpf']:.3f}")
    assert s["tpf"] >= 1.2 * t["tpf"]
    assert s["tpf"] >= 2.0
    assert s["accuracy"] >= a_v - 0.05


def test_aup_student_beats_teacher_beats_vanilla(runs):
    """AUP over thresholds 0.1/0.3/0.5/0.8 plus the rho = 1 vanilla point, y_max over both
    models: AUP(student) > AUP(teacher) > 100 A_v (measured 680.71 > 573.63 > 89.06)."""
    from d3llm.metrics import aup_table

    pts = {
        name: [[1.0, 100 * runs[f"{name}/vanilla"]["accuracy"]]]
        + [[runs[f"{name}/{t}"]["tpf"], 100 * runs[f"{name}/{t}"]["accuracy"]] for t in THRESHOLDS]
        for name in ("teacher", "student")
    }
    table = aup_table({"parity": pts})["parity"]
    a_v = runs["teacher/vanilla"]["accuracy"]
    print(f"AUP teacher {table['teacher']:.2f} student {table['student']:.2f}")
    assert table["student"] > table["teacher"] > 100 * a_v


def test_kv_cache_accuracy_and_tokens(runs):
    """Delayed KV cache (delay 1, refresh 3) on the student at threshold 0.5, blocks of 4:
    accuracy within 0.05 of the no-cache run (measured 0.969 vs 0.969) and fewer tokens
    processed (54.0 vs 63.0 per prompt). The >= 30 % cut is not reached (-14.3 %; at most
    28.6 % with this 9-token prompt and 12 generated positions, see the module docstring) and
    not asserted."""
    base, kv = runs["student/0.5-b4"], runs["student/0.5-b4-kv"]
    assert abs(kv["accuracy"] - base["accuracy"]) <= 0.05
    cut = 1 - kv["tokens_processed_per_sample"] / base["tokens_processed_per_sample"]
    print(f"tokens processed cut {cut:.3f} (target 0.30, not reached)")
    assert cut > 0.0
