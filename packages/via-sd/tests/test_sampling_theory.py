"""Speculative sampling is exact; the VIA step matches its analytic mixture; theory formulas."""

from __future__ import annotations

import random

import pytest
import torch
from via_sd import ViaSDConfig, theory
from via_sd.sampling import Sampler, route, speculative_step, via_sample_step

V = 8
TRIALS = 200_000


def toy(seed: int):
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(V, generator=g) * 1.5, -1)
    q = torch.softmax(torch.randn(V, generator=g) * 1.5, -1)
    qs = torch.softmax(torch.log(q) + 0.7 * torch.randn(V, generator=g), -1)
    return p, qs, q


def tv(a: torch.Tensor, b: torch.Tensor) -> float:
    return 0.5 * float((a - b).abs().sum())


def empirical(step, p: torch.Tensor, seed: int) -> torch.Tensor:
    s = Sampler(ViaSDConfig(temperature=1.0, seed=seed))
    drafts = torch.multinomial(
        p, TRIALS, replacement=True, generator=torch.Generator().manual_seed(seed + 1)
    )
    counts = torch.zeros(V)
    for d in drafts.tolist():
        counts[step(d, s)] += 1
    return counts / TRIALS


def test_speculative_step_recovers_target():
    p, _, q = toy(0)
    emp = empirical(lambda d, s: speculative_step(d, p, q, s)[0], p, 10)
    assert tv(emp, q) <= 0.01


def analytic_via(p, qs, q, ta, te):
    """π(v) = Σ_d p(d)·[tier A: δ_d; B: spec-sampling against q' ; C: against q]."""
    out = torch.zeros(V)
    for d in range(V):
        tier = route(float(qs[d] / qs.max()), ta, te)
        if tier == "a":
            out[d] += p[d]
            continue
        tgt = qs if tier == "b" else q
        acc = min(1.0, float(tgt[d] / p[d]))
        resid = (tgt - p).clamp_min(0)
        resid = resid / resid.sum()
        out[d] += p[d] * acc
        out += p[d] * (1 - acc) * resid
    return out


def test_via_sampling_step_matches_mixture():
    p, qs, q = toy(3)
    ta, te = 0.7, 0.4
    tiers = {route(float(qs[d] / qs.max()), ta, te) for d in range(V)}
    assert len(tiers) >= 2, "toy distributions should exercise several tiers"
    pi = analytic_via(p, qs, q, ta, te)
    assert float(pi.sum()) == pytest.approx(1.0, abs=1e-5)
    emp = empirical(lambda d, s: via_sample_step(d, p, qs, lambda: q, ta, te, s)[0], p, 20)
    assert tv(emp, pi) <= 0.01


def test_sd_speedup_spot_value():
    assert theory.sd_speedup(0.8, 5, 0.1) == pytest.approx((1 - 0.8**6) / (0.2 * 1.5))
    assert theory.sd_speedup(0.8, 5, 0.1) == pytest.approx(2.45952, abs=1e-5)
    assert theory.sd_expected_tokens(1.0, 5) == 6
    assert theory.via_speedup(0, 0, 1, 0, 0.8, 5, 0.1, 0.0) == pytest.approx(
        theory.sd_speedup(0.8, 5, 0.1)
    )
    assert theory.via_upper_bound(5, 0.1, 0.55) == pytest.approx(6 / 1.05)
    g = theory.optimal_gamma(0.8, 0.1)
    assert all(
        theory.sd_speedup(0.8, g, 0.1) >= theory.sd_speedup(0.8, k, 0.1) for k in range(1, 33)
    )


def test_sd_theory_matches_simulation():
    rng = random.Random(0)
    alpha, gamma, blocks = 0.7, 5, 40_000
    toks = 0
    for _ in range(blocks):
        n = 0
        while n < gamma and rng.random() < alpha:
            n += 1
        toks += n + 1  # accepted drafts + correction/bonus
    assert toks / blocks == pytest.approx(theory.sd_expected_tokens(alpha, gamma), rel=0.02)


def test_via_block_model_matches_simulation():
    rng = random.Random(1)
    a, b, e, kb, kc, gamma = 0.5, 0.2, 0.3, 0.0, 0.6, 5
    blocks, toks, qcalls = 40_000, 0, 0
    for _ in range(blocks):
        called = False
        n = 0
        while n < gamma:
            u = rng.random()
            if u < a:
                ok = True
            elif u < a + b:
                ok = rng.random() < kb
            else:
                called = True
                ok = rng.random() < kc
            if not ok:
                break
            n += 1
        toks += n + 1
        qcalls += called
    m = theory.via_block_model(a, b, e, kb, kc, gamma, 0.1, 0.55)
    assert toks / blocks == pytest.approx(m.expected_tokens, rel=0.02)
    assert qcalls / blocks == pytest.approx(m.target_calls_per_block, rel=0.02)


def test_per_block_target_calls_matches_simulation_with_mixed_draft_lengths():
    """The per-block form averages 1 - P_noq(γ_b) over the blocks' own draft lengths; a
    simulation with blocks of 2..5 positions agrees, and one γ for every block gives the
    closed form."""
    rng = random.Random(2)
    a, b, e, kb, kc = 0.6, 0.1, 0.3, 0.0, 0.2
    gammas = [rng.choice([2, 3, 5, 5]) for _ in range(40_000)]
    qcalls = 0
    for g in gammas:
        for _ in range(g):
            u = rng.random()
            if u < a:
                continue
            if u < a + b:
                if rng.random() < kb:
                    continue
                break
            qcalls += 1
            break  # q is called once per block; whether it accepts does not matter here
    pred = theory.via_target_calls_per_block(a, b, e, kb, kc, gammas)
    assert qcalls / len(gammas) == pytest.approx(pred, rel=0.02)
    one = theory.via_block_model(a, b, e, kb, kc, 5, 0.1, 0.55).target_calls_per_block
    assert theory.via_target_calls_per_block(a, b, e, kb, kc, [5] * 7) == pytest.approx(one)
    assert theory.via_target_calls_per_block(a, b, e, kb, kc, [0, 0]) == 0.0
    with pytest.raises(ValueError):
        theory.via_target_calls_per_block(a, b, e, kb, kc, [])


@pytest.mark.parametrize(
    "call",
    [
        lambda: theory.sd_speedup(1.2, 5, 0.1),
        lambda: theory.sd_speedup(0.5, 0, 0.1),
        lambda: theory.sd_speedup(0.5, 5, -1),
        lambda: theory.via_speedup(0.5, 0.5, 0.5, 0, 0.5, 5, 0.1, 0.5),
    ],
)
def test_theory_bad_input(call):
    with pytest.raises(ValueError):
        call()


def test_via_vs_sd_block_cost_break_even():
    # spot value: the claim run's P(no q) 0.37 with c = 0.25, c_s = 0.70 at gamma 5
    assert theory.via_vs_sd_block_cost(0.37, 5, 0.25, 0.70) == pytest.approx(
        (1.25 + 0.70 + 0.63) / 2.25
    )
    # the slim pass pays off exactly when it costs less than the share of blocks sparing q
    for p in (0.0, 0.2, 0.5, 0.9):
        for c_s in (0.1, 0.3, 0.6, 0.95):
            for c in (0.0, 0.1, 0.5):
                r = theory.via_vs_sd_block_cost(p, 5, c, c_s)
                assert (r < 1.0) == (c_s < p)
    # consistent with the three-tier block model's cost per block
    m = theory.via_block_model(0.7, 0.05, 0.25, 0.0, 0.8, 5, 0.1, 0.55)
    assert theory.via_vs_sd_block_cost(m.p_no_target, 5, 0.1, 0.55) == pytest.approx(
        m.cost_per_block / (5 * 0.1 + 1.0)
    )


def test_modelled_latency_is_linear_in_tokens():
    # 10 calls over 25 tokens: 10 x 2 ms plus 15 extra tokens at (5-2)/(6-1) = 0.6 ms
    assert theory.modelled_latency(10, 25, 2e-3, 5e-3, 6) == pytest.approx(10 * 2e-3 + 15 * 6e-4)
    assert theory.modelled_latency(4, 4, 2e-3, 5e-3, 6) == pytest.approx(8e-3)
    assert theory.modelled_latency(0, 0, 2e-3, 5e-3, 6) == 0.0


@pytest.mark.parametrize(
    "call",
    [
        lambda: theory.via_vs_sd_block_cost(1.5, 5, 0.1, 0.5),
        lambda: theory.via_vs_sd_block_cost(0.5, 0, 0.1, 0.5),
        lambda: theory.via_vs_sd_block_cost(0.5, 5, 0.1, -0.5),
        lambda: theory.modelled_latency(-1, 3, 1e-3, 2e-3, 6),
        lambda: theory.modelled_latency(1, 3, 1e-3, 2e-3, 1),
    ],
)
def test_cost_model_bad_input(call):
    with pytest.raises(ValueError):
        call()
