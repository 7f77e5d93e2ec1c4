"""Direction claims on the CPU arms (one seed), evaluated on the same 500 held-out problems and
512 balanced candidates (sampled once from the warm-up model) before and after training.

Setup: 2-digit addition, Llama 2 layers x 128 (0.56 M parameters), byte tokenizer, one torch
thread. Warm-up: 300 completion-only SFT steps (batch 32, lr 3e-3 cosine) on 6,000 documents,
half generation scratchpads, half verification (40 % recompute, 60 % verdict-only with an 80 %
Yes bias). GRPO: dapo loss, epsilon 0.2 / 0.28, T 1.0, 56 new tokens, lr 5e-5 constant, beta 0,
40 steps (tries 1-4; tries 5-10 change what they say). Timings measured on the shared 2-core
machine under load from other jobs.

Calibration (tries in order; Delta = arm minus warm-up on the fixed evaluation items):

* warm-up: greedy generation acc 0.568 (gate on 256 problems: 0.535), fixed-set verification
  acc 0.512 (acc_yes 0.902, acc_no 0.121; 75 % of greedy verdicts are verdict-only). Earlier
  warm-ups: 3-digit, 600 steps of a 1,200-step schedule: gen 0.79; 2-digit, 400 steps: 0.81
  (gate rejected); 2-digit, 350 steps of a 600-step schedule: 0.30.
* try 1, 4 prompts x 8, all 2,000 prompts: ``gen`` Delta gen -0.078, Delta ver +0.006 (train
  reward 0.06-0.38, no trend; 64 s); ``verify`` Delta gen -0.146, Delta ver -0.016 (greedy
  collapsed to verdict-only Yes, yes rate 0.99; 92 s).
* try 2, 8 prompts x 8, prompts prefiltered to 0 < pass@8 < 1 (456 of 600 kept): ``gen`` Delta
  gen +0.036, Delta ver 0.000 (156 s); ``verify`` Delta gen -0.494, Delta ver -0.010 (the
  policy's own rollouts degraded during verification training: all-wrong groups 0.25 -> 0.75-0.88;
  training verification accuracy stayed 0.33-0.58; 158 s).
* (a 3-digit prototype, 12 verify steps: training verification accuracy 0.44-0.52, no trend.)
* try 3 (levers 2 + 3), ``gen`` only: 4 prompts x 16 generations, beta 0.04 (reference model),
  lr 5e-5, prefiltered as try 2: Delta gen -0.054, Delta ver +0.008 (train reward 0.11-0.27,
  no trend; zero-std groups 0-0.5; KL 0.006-0.03; 186 s).
* try 4 (lever 2), ``gen`` only: 8 x 8, prefiltered, lr 1e-5, beta 0.04: Delta gen
  +0.038, Delta ver 0.000 (train reward 0.11-0.25, no trend; zero-std groups 0-0.375; KL <= 0.004;
  153 s). E1 still short of +0.08; the verify arm (E2) was not re-run.
* lever: rollout temperature. Pass rate of 300 training prompts under the warm-up, 8 samples
  each: T 1.0 mean 0.166 (kept 221, kept mean 0.226); T 0.7 0.295 (kept 250, kept mean 0.346);
  T 0.5 0.376 (kept 232, kept mean 0.434). The prefilter now samples at the rollout temperature.
* try 5, ``gen``, T 0.5, 8 x 8, prefiltered, lr 5e-5, beta 0, 40 steps: Delta gen +0.004,
  Delta ver -0.000 (train reward 0.39 -> ~0.5; 126 s).
* try 6, ``gen``, T 0.7, otherwise as try 5: Delta gen -0.004, Delta ver +0.008 (no trend;
  104 s).
* try 7, ``gen``, T 0.5, lr 2e-5, beta 0, 60 steps: Delta gen +0.072, Delta ver -0.006 (101 s).
* try 8, ``verify``, as try 7: Delta ver -0.002, Delta gen -0.116 (training verification
  accuracy 0.42-0.56 without a trend; verdict-only share 0.78 -> 0.45-0.67; 148 s).
* warm-up 2 (lever 1): recompute share 0.6 instead of 0.4, otherwise the same (117 s, gate
  passed): greedy gen acc 0.384, verification acc 0.486 (acc_yes 0.922, acc_no 0.051; 85 %
  verdict-only). New evaluation set from it (500 problems, 512 candidates; 21 s).
* try 9, from warm-up 2, as tries 7/8 (``CLAIM_ARMS``): ``gen`` Delta gen +0.110, Delta ver
  0.000 (train reward 0.14-0.41, no clear trend; 103 s); ``verify`` Delta ver +0.006 (3 of 512
  candidates), Delta gen -0.086 (training verification accuracy 0.44-0.56, no trend; 138 s).
* try 10, try 9 with arm seed 1 (same warm-up 2 and evaluation items): ``gen`` Delta gen
  +0.076, Delta ver -0.002 (91 s); ``verify`` Delta ver -0.018, Delta gen -0.030 (123 s).

E1 holds as written on try 9 (gen +0.110 >= 0.08; |0.000| < 0.5 x 0.006), but its second half
rests on a verify-arm gain of 3 candidates, i.e. noise, so it is not evidence of the asymmetry,
and with seed 1 (try 10) both halves fail (+0.076; verify gain -0.018). The two arms plus
their own warm-up and evaluation set also cost ~380 s cold (over the 6 CPU-min fixture budget
on top of the default warm-up), so E1 stays ``extended``. E2 does not hold (+0.006 / -0.086;
seed 1: -0.018 / -0.030). The default tier keeps the warm-up window, which holds.

Diagnosis (after try 10): the warm-up's recompute responses are nearly always wrong. Sampling 4
verification responses for each of 96 synthetic and 96 self-sampled candidates from the default
warm-up, the recompute-style ones (37-48 % of responses) wrote the true sum in 1-13 % of cases
and copied the candidate correctly in 2-12 % (T 0.5 and T 1.0), while generation at T 0.5 solves
~0.38 of prompts; their verdicts say Yes as often on No items as on Yes items. The recompute-heavier
warm-up 2 is no better (true sum 4-8 of 61-62, candidate copied 5-6 of 61-62, T 0.5). So
verification accuracy can rise only through the verdict-only channel, which cannot tell the
classes apart: verification GRPO has no accurate behaviour to reinforce, which explains E2.

Try 11 (lever 5, recipe written before measuring): make the recompute skill competent while
greedy decoding stays verdict-only. Warm-up ``RECOMPUTE_WARMUP``: ``verify_fraction`` 0.75,
``recompute_share`` 0.6, 450 SFT steps (recompute documents seen ~3.4x the default, generation
documents ~0.75x; everything else as ``WARMUP``), gated as usual. Step 1: measure recompute
quality as above (go on only if the sampled recompute writes the true sum in >= 30 % of cases);
step 2: ``verify`` arm as ``CLAIM_ARMS`` (8 x 8, prefiltered, T 0.5, lr 2e-5, beta 0, 60 steps)
from it, evaluated on its own evaluation set; E2's thresholds unchanged.
"""

from __future__ import annotations

import re

import pytest

pytestmark = [pytest.mark.claim, pytest.mark.slow]


def recompute_warmup():
    """Try 11's warm-up: more verification (and recompute) documents, 450 SFT steps."""
    from dataclasses import replace

    from selfverify_rl.experiments import WARMUP

    return replace(WARMUP, verify_fraction=0.75, recompute_share=0.6, steps=450)


def recompute_quality(model, tok, spec, *, temperature: float = 0.5) -> dict[str, float]:
    """Share of sampled recompute-style verification responses (4 per candidate, 96 synthetic
    balanced candidates on held-out problems) that write the true sum, copy the candidate, and
    give the right verdict."""
    from selfverify_rl.evaluate import _generate
    from selfverify_rl.experiments import held_out_problems, synthetic_candidates
    from selfverify_rl.prompts import verification_prompt
    from selfverify_rl.rewards import parse_verdict

    cands = synthetic_candidates(held_out_problems(spec)[:96], seed=11)
    prompts = [verification_prompt(c["question"], c["candidate"]) for c in cands]
    outs = _generate(model, tok, prompts, n=4, temperature=temperature, max_new_tokens=56, seed=1)
    n = true_sum = copied = right = 0
    for c, o in zip(cands, outs, strict=True):
        a, b = (int(x) for x in c["question"].split("+"))
        for text in (x.text for x in o):
            if text.lstrip().startswith("\\boxed"):
                continue  # verdict-only
            n += 1
            right += parse_verdict(text) == c["label"]
            m = re.search(r"\|(\d+)(!?=)(\d+)", text)
            if m:
                true_sum += int(m.group(1)) == a + b
                copied += m.group(3) == c["candidate"]
    return {"n": n, "true_sum": true_sum / n, "copied": copied / n, "right": right / n}


@pytest.fixture(scope="module")
def warm_scores(warm_entry, evalset_entry):
    from selfverify_rl.experiments import evaluate_checkpoint

    return evaluate_checkpoint(*warm_entry.load(), evalset_entry)


@pytest.fixture(scope="module")
def arm_scores():
    """The claims' recipe: its own warm-up and evaluation set, then one cached arm per mode."""
    from selfverify_rl.experiments import (
        CLAIM_ARMS,
        CLAIM_WARMUP,
        build_arm,
        build_evalset,
        build_warmup,
        evaluate_checkpoint,
    )

    evalset = build_evalset(CLAIM_WARMUP)
    out = {"warmup": evaluate_checkpoint(*build_warmup(CLAIM_WARMUP).load(), evalset)}
    for mode in ("gen", "verify"):
        arm = build_arm(CLAIM_ARMS[mode], CLAIM_WARMUP)
        out[mode] = evaluate_checkpoint(*arm.load(), evalset)
    return out


def test_warmup_in_window(warm_scores):
    """The warm-up leaves room both ways: greedy gen acc in [0.3, 0.7] (measured 0.568),
    fixed-set verification accuracy in [0.45, 0.65] (measured 0.512: mostly verdict-only Yes)."""
    w = warm_scores
    assert 0.3 <= w["gen_acc"] <= 0.7, w
    assert 0.45 <= w["ver_acc"] <= 0.65, w
    assert w["ver_verdict_only_rate"] > 0.5  # the engineered weakness: mostly no recompute


@pytest.mark.extended
def test_e1_generation_training_asymmetry(arm_scores):
    """E1: gen-mode GRPO raises generation accuracy by >= 0.08 while its verification accuracy
    moves by less than half of what verify-mode GRPO gains. Measured (try 9, ``CLAIM_ARMS`` from
    ``CLAIM_WARMUP``): +0.110 and 0.000 against a verify-mode gain of +0.006: holds, the second
    half only by 0.003 on a noise-level verify gain; with arm seed 1 (try 10): +0.076 and -0.002
    against -0.018: does not hold (see the module docstring)."""
    w, g, v = arm_scores["warmup"], arm_scores["gen"], arm_scores["verify"]
    assert g["gen_acc"] - w["gen_acc"] >= 0.08, (w, g)
    ver_gain = v["ver_acc"] - w["ver_acc"]
    assert abs(g["ver_acc"] - w["ver_acc"]) < 0.5 * ver_gain, (w, g, v)


@pytest.mark.extended
def test_e2_verification_training_transfers(arm_scores):
    """E2: verify-mode GRPO raises verification accuracy by >= 0.10 and generation accuracy by
    >= 0.03. Measured (try 9): +0.006 and -0.086 (try 10, seed 1: -0.018 and -0.030; try 8 on
    the default warm-up: -0.002 and -0.116; try 2: -0.010 and -0.494): does not hold."""
    w, v = arm_scores["warmup"], arm_scores["verify"]
    assert v["ver_acc"] - w["ver_acc"] >= 0.10, (w, v)
    assert v["gen_acc"] - w["gen_acc"] >= 0.03, (w, v)


@pytest.mark.extended
def test_lever5_recompute_becomes_competent(warm_entry):
    """Try 11, step 1: the recompute-heavier, longer warm-up writes the true sum in >= 30 % of
    sampled recompute responses (T 0.5). Measured: default warm-up 10 of 132 (0.076; candidate
    copied 12 of 132; right verdict 76 of 132); ``recompute_warmup()`` 129 of 221 (0.58; copied 171 of 221, right verdict
    129 of 221; gate gen acc 0.477, verification acc 0.594; 450 steps, 185 s CPU): holds."""
    from selfverify_rl.experiments import WARMUP, build_warmup

    base = recompute_quality(*warm_entry.load(), WARMUP)
    lever = recompute_quality(*build_warmup(recompute_warmup()).load(), recompute_warmup())
    print(base, lever)
    assert base["true_sum"] < 0.30 <= lever["true_sum"], (base, lever)


@pytest.mark.extended
def test_e2_with_a_competent_recompute():
    """E2 on try 11 (``verify`` arm as ``CLAIM_ARMS`` from ``recompute_warmup()``, its own
    evaluation set). Measured: warm-up gen 0.494, verification 0.506 (acc_yes 0.969, acc_no
    0.043; greedy verdict-only only 30 %: greedy recomputes, but on the model's own wrong answers
    the recompute repeats or copies the candidate); ``verify`` arm gen 0.298 (-0.196),
    verification 0.492 (-0.014); training verification accuracy 0.48-0.53 without a trend, Yes
    rate 0.76-0.85 on No items as on Yes items (442 s under load): does not hold."""
    from selfverify_rl.experiments import (
        CLAIM_ARMS,
        build_arm,
        build_evalset,
        build_warmup,
        evaluate_checkpoint,
    )

    spec = recompute_warmup()
    evalset = build_evalset(spec)
    w = evaluate_checkpoint(*build_warmup(spec).load(), evalset)
    v = evaluate_checkpoint(*build_arm(CLAIM_ARMS["verify"], spec).load(), evalset)
    print(w, v)
    assert v["ver_acc"] - w["ver_acc"] >= 0.10, (w, v)
    assert v["gen_acc"] - w["gen_acc"] >= 0.03, (w, v)
