"""The paper's claims on the fictitious-author world, pooled over 3 seeds (3 forget pairs): the
greedy-stopped GradDiff baseline leaks under sampling and RULE cuts that leak (below), and a
greedy-stopped NPO baseline leaks more at T = top-p = 1 than at 0.2 (at the end of the file).

Recipe (calibrated in this package): GradDiff, forget authors whose attribute values no
retain author shares, pre-training until every forget fact is answered greedily, a greedy-forget
stop checked after every step. The learning rate is 3e-5 rather than 1e-5: at 1e-5 the same
stop needs ~3x the steps (over 10 minutes per seed on the 2 shared CPU cores), beyond the test
budget; the direction is the same.

Asserted (thresholds fixed before calibration, never moved): after the stop (greedy forget
accuracy <= 10 % on every seed), leak@16 >= 0.15, >= 1.5 x the greedy leak and above chance@16 (the same statistic for a
random wrong value of the same attribute on the same samples); RULE gives leak@16 <= 0.5 x the
baseline's, with greedy retain accuracy within 0.15 of the baseline's on every seed.

Why pooled (the fix of a fresh-machine failure): the first version asserted these per seed, on
the 10 forget queries of one pair with n = 32 samples. leak@16 then moves in steps of 0.1 (one
query) and the per-seed margins were one step: CI on a fresh machine measured seed 2 at RULE
0.100 vs baseline 0.200 (needs <= 0.100 — exactly on the threshold) and this package's own cold
build at 0.1125 vs 0.2125 (fails). The cause is one "stubborn" fact: the greedy stop at <= 10 %
leaves at most one forget fact that greedy decoding still answers; whether a build ends with one
that RULE's 60 extra steps cannot remove is decided by the last bits of the world model (the
compute-matched control does not remove it either). The per-seed claim is a coin flip on that
fact, not a measurement. Now: n = 128 samples per query (the per-query leak@16 estimate is
smooth: 2 leaks of 128 give 0.02 where 1 of 32 gave 0.5) and the claim is the paired mean over
the 30 forget queries of seeds 0-2 (resolution 1/30 = 0.033); the statistic is
``paired_claim``: margin = mean_i (0.5 x baseline_i - RULE_i), with the standard error of that
mean over queries. Per-seed values are printed, not asserted.

Measured margins (claim value minus threshold; two builds from an empty cache, world model
trained with LLMCORE_ZOO_THREADS=1 / =2, everything else one thread):
Build A: LLMCORE_ZOO_THREADS=1. Build B: LLMCORE_ZOO_THREADS=2 (OMP_WAIT_POLICY=PASSIVE; its world
weights came out bit-identical to A's on this AMD EPYC / AVX2 machine, sha256 7a840733..., so
every number below is the same for A and B). Since A = B says nothing about another machine,
build C emulates one: ATEN_CPU_CAPABILITY=default and MKL_ENABLE_INSTRUCTIONS=SSE4_2 (other
CPU kernels), one thread; its world differs (held-out loss 0.3191 vs 0.3172) and the greedy
stop fires at other steps (A/B 318, 289, 241; C 268, 228, 271).

| claim (value - threshold)                    | A = B            | C                |
|----------------------------------------------|------------------|------------------|
| pooled leak@16 - 0.15 (= - 1.5 x greedy 0.1) | +0.079           | +0.103           |
| pooled leak@16 - chance@16                   | +0.225           | +0.226           |
| pooled 0.5 x baseline - RULE (paired mean)   | +0.069 (se 0.039) | +0.079 (se 0.042) |
| retain: RULE - (baseline - 0.15), seeds 0/1/2 | +0.183/+0.161/+0.194 | +0.128/+0.150/+0.161 |
| greedy forget acc <= 0.10, every seed         | 0 (the stop rule itself) | 0 |

Pooled leak@16: baseline 0.229 (A) / 0.253 (C), RULE 0.045 / 0.047. Spread between builds:
0.010 on the RULE margin, 0.024 on the first claim's value, both below the margins (0.069 and
0.079 = 2 query steps or more). Resolution 1/30 = 0.033 (one query flipping fully).
Per seed (printed, not asserted), 0.5 x baseline - RULE: A +0.114/+0.100/-0.006,
C +0.093/+0.139/+0.006 (seed 2 keeps its stubborn greedy-leaking fact in both, 128/128
samples); leak@16 - 0.15: A +0.125/+0.050/+0.062, C +0.119/+0.128/+0.062.
Compute-matched control (build A, report only, extended tier): pooled leak@16 0.104, paired
margin +0.011 (se 0.043): it would sit on the threshold.
"""

from __future__ import annotations

import itertools
import json

import pytest
from unlearn_leakk import fixtures
from unlearn_leakk.experiment import WorldConfig, paired_claim, pooled_leak, run_world

pytestmark = [pytest.mark.claim, pytest.mark.slow]

SEEDS = (0, 1, 2)


def _summary(r):
    return json.dumps({k: v for k, v in r.items() if "counts" not in k}, default=str)


@pytest.fixture(scope="module")
def results(world_entry):
    out = []
    for s in SEEDS:
        r = run_world(WorldConfig(seed=s, run_control=False))
        print(_summary(r))
        out.append(r)
    return out


def _mean(xs):
    return sum(xs) / len(xs)


def test_greedy_says_forgotten_but_sampling_leaks(results):
    for r in results:
        assert r["base_stopped"], f"seed {r['seed']}: the greedy stop never fired"
        assert r["baseline_greedy_forget_acc"] <= 0.10
        curve = [r[f"baseline_leak@{k}"] for k in (1, 2, 4, 8, 16, 32)]
        assert all(b >= a - 1e-12 for a, b in itertools.pairwise(curve))
    leak16 = _mean(pooled_leak(results, "baseline", 16))
    greedy = _mean([r["baseline_greedy_forget_acc"] for r in results])
    chance16 = _mean([r["baseline_chance@16"] for r in results])
    print(f"pooled leak@16 {leak16:.4f} greedy {greedy:.4f} chance@16 {chance16:.4f}")
    assert leak16 >= 0.15
    assert leak16 >= 1.5 * greedy
    assert leak16 > chance16


def test_rule_cuts_leak_at_k_and_keeps_retain(results):
    c = paired_claim(results, k=16, factor=0.5)
    print(
        f"pooled leak@16 baseline {c['baseline']:.4f} RULE {c['rule']:.4f} threshold "
        f"{c['threshold']:.4f} margin {c['margin']:.4f} (se {c['se']:.4f}, step {c['step']:.4f})"
    )
    for r in results:
        print(
            f"seed {r['seed']}: leak@16 baseline {r['baseline_leak@16']:.4f} RULE "
            f"{r['rule_leak@16']:.4f}; retain acc baseline {r['baseline_greedy_retain_acc']:.3f} "
            f"RULE {r['rule_greedy_retain_acc']:.3f}"
        )
        assert r["rule_greedy_retain_acc"] >= r["baseline_greedy_retain_acc"] - 0.15
    assert c["rule"] <= 0.5 * c["baseline"]


@pytest.mark.extended
def test_compute_matched_control_report(world_entry):
    """Report only: the baseline trained for RULE's extra steps on the plain forget set."""
    res = [run_world(WorldConfig(seed=s)) for s in SEEDS]
    c = paired_claim(res, k=16, factor=0.5, tag="control")
    r = paired_claim(res, k=16, factor=0.5)
    print(
        f"pooled leak@16 baseline {c['baseline']:.4f} RULE {r['rule']:.4f} control "
        f"{c['control']:.4f} (control margin {c['margin']:.4f}, se {c['se']:.4f})"
    )
    for x in res:
        print(_summary(x))
    assert r["rule"] <= 0.5 * r["baseline"]


# --- NPO: sampling leaks what greedy-like decoding hides ---------------------------------

#: NPO learning rate of the claim (a registered fixture): at the GradDiff rate (3e-5) NPO
#: never reaches the greedy stop within 400 steps (its forget gradient shrinks as the forget
#: likelihood drops).
NPO_LR = fixtures.NPO_LR


def _npo_leak16(model, tok, forget, seed, t, p):
    from unlearn_leakk.config import DecodingConfig
    from unlearn_leakk.estimator import leak_at_k
    from unlearn_leakk.evaluate import per_item_counts
    from unlearn_leakk.judges import ExactPhraseJudge
    from unlearn_leakk.sampling import sample_responses

    dec = DecodingConfig(t, p, n=128, max_new_tokens=16, seed=1000 + seed, batch_size=128)
    outs = sample_responses(model, tok, forget, dec, chat_template=False)
    counts = per_item_counts(outs, forget, ExactPhraseJudge())
    return [leak_at_k(128, c, 16) for c in counts]


@pytest.fixture(scope="module")
def npo_results(world_entry):
    from unlearn_leakk.experiment import baseline_checkpoint

    out = []
    for s in SEEDS:
        model, tok, world, info = baseline_checkpoint(WorldConfig(seed=s, method="NPO", lr=NPO_LR))
        forget = world.qa_items(world.forget_authors(s % 3))
        r = {"seed": s, **info}
        r["low"] = _npo_leak16(model, tok, forget, s, 0.2, 0.2)
        r["high"] = _npo_leak16(model, tok, forget, s, 1.0, 1.0)
        print(
            f"NPO seed {s}: steps {r['base_steps']} stopped {r['base_stopped']} leak@16 "
            f"(0.2, 0.2) {_mean(r['low']):.4f} (1, 1) {_mean(r['high']):.4f}"
        )
        out.append(r)
    return out


def test_npo_leaks_more_at_high_temperature(npo_results):
    """NPO stopped when greedy says "forgotten" (greedy forget accuracy <= 10 %, lr 3e-4,
    gamma = alpha = 1, beta = 0.5, NLL retain loss) leaks more under full-temperature sampling
    than under near-greedy sampling: pooled leak@16 at T = top-p = 1 >= at T = top-p = 0.2
    (exact phrase, n = 128 per query, 30 forget queries of seeds 0-2).

    Calibration (one build, one thread; the greedy stop fired after 121 / 172 / 113 steps):
    leak@16 at (0.2, 0.2) = 0.100 on every seed (top-p 0.2 keeps only the top token, so it is
    the greedy leak: the one fact greedy decoding still answers); at (1, 1) 0.521 / 0.133 /
    0.268, pooled 0.308 vs 0.100: paired difference +0.208 (standard error over queries 0.067),
    about 6 query steps (1/30) above the threshold. Seed 1 is the weak one: its (1, 1) leak@16
    0.133 equals the chance level there (0.134, a random wrong value of the same attribute on
    the same samples), so the pooled statistic, not each seed, carries the claim.
    """
    for r in npo_results:
        assert r["base_stopped"], f"seed {r['seed']}: the greedy stop never fired"
    low = _mean([x for r in npo_results for x in r["low"]])
    high = _mean([x for r in npo_results for x in r["high"]])
    print(f"NPO pooled leak@16: (0.2, 0.2) {low:.4f} (1, 1) {high:.4f}")
    assert high >= low
