"""The paper's direction on the CPU fixtures.

64 held-out prompts, γ = 5, τ = (0.7, 0.5), greedy, and the slim verifier the paper uses: the
skip mask found by the DIMR search (``dimr_search``, 3 of 8 layers, cached as the ``via-sd-mask``
zoo entry; [3, 5, 6] on the current target). Asserted: full-model forwards VIA < SD < AR and
VIA <= 0.8 x SD; VIA accuracy within 0.10 of AR; SD output identical to AR; AR forwards ==
tokens; the block model (applied to each block's own draft length) predicts VIA's target
forwards per block within 10 %. Rejection rates are a report (extended tier), not a claim: in
greedy mode a slim regeneration counts as a rejection, so the rate can only fall by accepting
tokens the target would reject.

Margins (value minus threshold) are measured on the one-stage target built cold from empty
caches twice (``LLMCORE_ZOO_THREADS=1`` and ``=2``: bit-identical weights, so one set of values)
with the searched mask; the evenly spaced mask [2, 4, 6] the claims used before is given beside
them. Tiers: the forwards, theory and cost-bound tests run by default; the strong-drafter regime
(an ablation of the drafter), the rejection-rate report and the τ sweep are ``extended``.
"""

from __future__ import annotations

import itertools

import pytest
from conftest import encode
from via_sd import (
    SlimVerifier,
    ViaSDConfig,
    autoregressive_generate,
    speculative_generate,
    theory,
    via_sd_generate,
)
from via_sd.bench import COUNTERS, measure_latencies
from via_sd.theory import via_block_model, via_target_calls_per_block
from via_sd.tiny import score


def run_all(fx, prompts, cfg, mask, methods=("ar", "sd", "via")):
    slim = SlimVerifier(fx.target, skip_layers=mask)
    out = {m: [] for m in methods}
    for row in prompts:
        ids = encode(fx.tokenizer, row["prompt"])
        for m in methods:
            if m == "ar":
                r = autoregressive_generate(fx.target, ids, cfg)
            elif m == "sd":
                r = speculative_generate(fx.target, fx.drafter, ids, cfg)
            else:
                r = via_sd_generate(fx.target, fx.drafter, slim, ids, cfg)
            text = fx.tokenizer.decode(r.new_tokens, skip_special_tokens=True)
            out[m].append((r, score(text, row["reference"])))
    return out


def totals(rs):
    t = {k: sum(getattr(r.stats, k) for r, _ in rs) for k in COUNTERS}
    t["accuracy"] = sum(ok for _, ok in rs) / len(rs)
    t["rejection_rate"] = t["rejections"] / t["drafted"] if t["drafted"] else 0.0
    t["wall"] = sum(r.stats.wall_time_s for r, _ in rs)
    return t


@pytest.fixture(scope="module")
def mask(searched_mask):
    """The DIMR-searched skip set of the target fixture."""
    return searched_mask.metrics["skip_layers"]


@pytest.fixture(scope="module")
def greedy_run(fx, prompts64, mask):
    cfg = ViaSDConfig(
        gamma=5, max_new_tokens=48, eos_token_id=fx.tokenizer.eos_token_id, measure_divergence=True
    )
    return run_all(fx, prompts64, cfg, mask)


@pytest.mark.claim
def test_claim_fewer_full_model_forwards_at_near_ar_accuracy(greedy_run):
    """Searched mask [3, 5, 6]: target forwards AR 1762, SD 633, VIA 411; VIA/SD 0.649, margin
    0.151 under 0.8 (95 forwards); accuracy AR 0.938, VIA 0.906, margin +0.069 over AR - 0.10
    (4 prompts). Evenly spaced mask: VIA 413 (0.652), accuracy 0.953. Both cold builds have
    identical weights (sha256 2b995d29...), so the same values; spread 0."""
    ar, sd, via = (greedy_run[m] for m in ("ar", "sd", "via"))
    for (a, _), (s, _) in zip(ar, sd, strict=True):
        assert a.stats.target_forwards == a.stats.tokens
        assert s.new_tokens == a.new_tokens
    T = {m: totals(greedy_run[m]) for m in greedy_run}
    div = sum(r.stats.divergence_rate * r.stats.tokens for r, _ in via) / T["via"]["tokens"]
    print("\nclaim (greedy, 64 prompts):")
    for m, t in T.items():
        print(
            f"  {m}: target_forwards={t['target_forwards']} acc={t['accuracy']:.3f} "
            f"rej={t['rejection_rate']:.3f} tiers=({t['tier_a']},{t['tier_b']},{t['tier_c']}) "
            f"slim={t['slim_forwards']} draft={t['draft_forwards']} "
            f"target_tokens={t['target_tokens_processed']} slim_tokens={t['slim_tokens_processed']}"
        )
    print(
        f"  VIA/SD target forwards = {T['via']['target_forwards'] / T['sd']['target_forwards']:.3f}"
        f"; VIA divergence rate = {div:.3f}"
    )
    assert T["via"]["target_forwards"] < T["sd"]["target_forwards"] < T["ar"]["target_forwards"]
    assert T["via"]["target_forwards"] <= 0.8 * T["sd"]["target_forwards"]
    assert T["via"]["accuracy"] >= T["ar"]["accuracy"] - 0.10


@pytest.mark.claim
def test_claim_theory_predicts_target_forwards_per_block(greedy_run):
    """The block model with the measured tier rates predicts the measured target calls per
    block within 10 %. The model is applied to each block's own draft length (blocks end early
    at EOS and at the token budget, so many offer fewer than γ = 5 drafts). The fixed-γ closed
    form is printed for the record, not asserted.

    Fragile: the model over-predicts systematically (escalations cluster in the blocks of the
    hard M digits, which an i.i.d. model cannot see), so the error sits just inside the
    tolerance. Searched mask: prediction 0.7190 vs measured 0.6513 (411 / 631), relative error
    -0.0940, margin 0.006 (0.6 points of the 10 %); evenly spaced mask: -0.0927. Both cold
    builds have identical weights, so the same values; the previous two-stage target measured
    -0.096 and -0.093 on its two builds (even mask). More prompts shrink the noise but not this
    bias; the threshold is left where it was."""
    v = totals(greedy_run["via"])
    n = v["drafted"]
    a, b, e = v["tier_a"] / n, v["tier_b"] / n, v["tier_c"] / n
    kc = 1 - v["rejections_c"] / v["tier_c"] if v["tier_c"] else 1.0
    drafts = [g for r, _ in greedy_run["via"] for g in r.stats.block_drafts]
    assert len(drafts) == v["blocks"]
    pred = via_target_calls_per_block(a, b, e, 0.0, kc, drafts)
    fixed = via_block_model(a, b, e, 0.0, kc, 5, 0.1, 0.55).target_calls_per_block
    measured = v["target_forwards"] / v["blocks"]
    print(
        f"\ntheory: per-block {pred:.4f} (fixed gamma=5: {fixed:.3f}) vs measured "
        f"{measured:.4f} target calls per block, relative error {measured / pred - 1:+.4f} "
        f"({sum(g < 5 for g in drafts)} of {len(drafts)} blocks offered fewer than 5 drafts)"
    )
    assert measured == pytest.approx(pred, rel=0.10)


def test_cost_model_bounds_wall_clock_against_sd(greedy_run, fx, mask):
    """Why the CPU wall-clock target (VIA no slower than SD) is out of reach on these
    fixtures, on any hardware: per block VIA pays one slim pass (c_s of a target forward)
    to spare q in a share P of blocks, so it is faster only if c_s < P
    (theory.via_vs_sd_block_cost). A slim forward costs at least the fraction of layers it
    keeps (5/8 here: it shares embeddings, head and per-call overhead with q and runs 5 of
    q's 8 layers), and the measured P with this drafter (agreement 0.75) at γ = 5 is 0.35.
    Counts only, so deterministic; fails (and the README must change) if the fixtures move
    into the regime where VIA can win. Searched mask: P 0.349, margin 0.276 below 5/8 (cost per
    block >= 1.276); evenly spaced mask: P 0.347."""
    v = totals(greedy_run["via"])
    slim = SlimVerifier(fx.target, skip_layers=mask)
    p_noq = 1.0 - v["target_forwards"] / v["blocks"]
    floor = theory.via_vs_sd_block_cost(p_noq, 5, 0.0, slim.kept_fraction)
    print(
        f"\nP(block spares q) = {p_noq:.3f}; c_s >= kept fraction {slim.kept_fraction:.3f}; "
        f"VIA/SD cost per block >= {floor:.3f}"
    )
    assert p_noq < slim.kept_fraction and floor > 1.0


@pytest.fixture(scope="module")
def strong_run(prompts64, mask):
    """SD and VIA-SD at γ = 2 with a drafter trained 1,200 steps (agreement 0.988 with q,
    above the default fixture's 0.6-0.9 gate), 32 prompts, the searched mask, and the
    per-forward latencies of q, p and q' measured by the bench's own micro-benchmark
    (``via_sd.bench.measure_latencies``: c = t_p / t_q, c_s = t_q' / t_q)."""
    from via_sd.tiny import build_fixtures

    strong = build_fixtures(progress=False, drafter_steps=1200)  # ~50 s cold, then cached
    cfg = ViaSDConfig(gamma=2, max_new_tokens=48, eos_token_id=strong.tokenizer.eos_token_id)
    run = run_all(strong, prompts64[:32], cfg, mask)
    slim = SlimVerifier(strong.target, skip_layers=mask)
    lat = measure_latencies(strong.target, strong.drafter, slim, 2, repeats=60)
    return strong, run, slim, lat


@pytest.mark.claim
@pytest.mark.extended
def test_claim_strong_drafter_regime_favours_via(strong_run):
    """The paper's wall-clock direction needs the regime where c_s < P (see the test above).
    With a strong drafter q is spared in most blocks, so P is far above the slim verifier's
    kept fraction 5/8. The cost model is evaluated with this run's MEASURED cost ratios: the
    drafter's c and the slim pass's c_s (both from the bench's micro-benchmark on this
    machine), so it is the cost per block VIA pays here, not a best case. The price is
    accuracy (lossy): printed, not asserted.

    Measured (searched mask [3, 5, 6], 2026-12-01, machine at load 8-11): agreement 0.988,
    P 0.971 (margin 0.121), VIA 9 vs SD 313 target forwards. The cost ratio with measured c and
    c_s was 0.737 in the passing extended run, but 0.745-0.949 in four more micro-benchmarks
    of the same models (0.716-0.880 in four with the even mask; c 0.13-0.50 and c_s 0.51-0.87
    across all: load noise), and the idle-machine latencies of the README's regime map (c 0.30, c_s 0.68) give 0.82. So the
    paper's direction (below 1) held in every measurement, the kept 0.8 threshold only in
    some: this assertion is expected to fail on an idle machine. The threshold was not moved."""
    strong, run, slim, lat = strong_run
    v, sd, ar = totals(run["via"]), totals(run["sd"]), totals(run["ar"])
    p_noq = 1.0 - v["target_forwards"] / v["blocks"]
    cost = theory.via_vs_sd_block_cost(p_noq, 2, lat["c"], lat["c_s"])
    print(
        f"\nstrong drafter (agreement {strong.info['agreement']:.3f}), gamma 2, mask "
        f"{slim.skip_layers}: P(block spares q) = {p_noq:.3f}; target forwards VIA "
        f"{v['target_forwards']} vs SD {sd['target_forwards']}; measured c = {lat['c']:.3f}, "
        f"c_s = {lat['c_s']:.3f}; VIA/SD cost per block {cost:.3f} (with c = 0 and c_s = kept "
        f"fraction: {theory.via_vs_sd_block_cost(p_noq, 2, 0.0, slim.kept_fraction):.3f}); "
        f"accuracy AR {ar['accuracy']:.3f} SD {sd['accuracy']:.3f} VIA {v['accuracy']:.3f}; "
        f"wall VIA/SD {v['wall'] / sd['wall']:.3f}"
    )
    assert strong.info["agreement"] > 0.9
    assert p_noq >= 0.85 and p_noq > slim.kept_fraction + 0.2
    assert v["target_forwards"] <= 0.2 * sd["target_forwards"]
    assert cost < 1.0, "the paper's direction: VIA cheaper than SD per block"
    assert cost < 0.8, "the claim's threshold (unchanged from the c = 0 version)"


@pytest.mark.perf
def test_wall_clock_strong_drafter_regime(strong_run):
    """Perf marker: in the strong-drafter regime VIA-SD is no slower than SD (calibration:
    0.80 x at γ = 2)."""
    _, run, _, _ = strong_run
    assert totals(run["via"])["wall"] <= totals(run["sd"])["wall"]


@pytest.mark.extended
def test_report_rejection_rates_greedy_and_sampling(greedy_run, fx, prompts64, mask):
    """Report (not a claim): SD's and VIA's rejection rates, greedy on 64 prompts and sampling
    at T = 1 on 16; the paper reports VIA 0.10-0.22 lower, these fixtures show no gap (README).
    Asserted are only the counters' bookkeeping: rejections split into the slim verifier's and
    the target's, and every rate is a share of the routed drafts."""
    g = {m: totals(greedy_run[m]) for m in ("sd", "via")}
    cfg = ViaSDConfig(
        gamma=5, max_new_tokens=48, temperature=1.0, seed=0, eos_token_id=fx.tokenizer.eos_token_id
    )
    s = run_all(fx, prompts64[:16], cfg, mask, methods=("sd", "via"))
    st = {m: totals(s[m]) for m in s}
    print(
        f"\nrejection rate greedy: SD {g['sd']['rejection_rate']:.3f} VIA "
        f"{g['via']['rejection_rate']:.3f}; sampling T=1 (16 prompts): SD "
        f"{st['sd']['rejection_rate']:.3f} VIA {st['via']['rejection_rate']:.3f}"
    )
    for t in (g["via"], st["via"]):
        assert t["rejections"] == t["rejections_b"] + t["rejections_c"]
        assert t["tier_a"] + t["tier_b"] + t["tier_c"] == t["drafted"]
        assert 0.0 <= t["rejection_rate"] <= 1.0


@pytest.mark.extended
def test_threshold_sweep_monotone(fx, prompts64, mask):
    """Target forwards non-decreasing, divergence non-increasing in tau_escalate (tolerance:
    one prompt's worth)."""
    slim = SlimVerifier(fx.target, skip_layers=mask)
    rows = []
    prompts = prompts64[:16]
    for te in (0.0, 0.3, 0.5, 0.7, 1.01):
        cfg = ViaSDConfig(
            gamma=5,
            max_new_tokens=48,
            tau_escalate=te,
            tau_accept=max(0.7, te),
            eos_token_id=fx.tokenizer.eos_token_id,
            measure_divergence=True,
        )
        tf = dv = 0.0
        for row in prompts:
            r = via_sd_generate(
                fx.target, fx.drafter, slim, encode(fx.tokenizer, row["prompt"]), cfg
            )
            tf += r.stats.target_forwards
            dv += r.stats.divergence_rate or 0.0
        rows.append((te, tf, dv / len(prompts)))
    print("\nsweep (tau_escalate, target_forwards, divergence):", rows)
    per_prompt_tf = max(t for _, t, _ in rows) / len(prompts)
    for (_, tf0, dv0), (_, tf1, dv1) in itertools.pairwise(rows):
        assert tf1 >= tf0 - per_prompt_tf
        assert dv1 <= dv0 + 1.0 / len(prompts)
    assert rows[-1][2] == 0.0  # everything escalated: exact


@pytest.mark.perf
def test_wall_clock_side_by_side(greedy_run, fx, mask):
    """Perf marker: VIA wall <= 1.10 x SD wall and SD wall <= AR wall; skipped when the
    measured drafter/target cost ratio is above 0.5."""
    slim = SlimVerifier(fx.target, skip_layers=mask)
    lat = measure_latencies(fx.target, fx.drafter, slim, 5)
    T = {m: totals(greedy_run[m]) for m in greedy_run}
    print(
        f"\nwall s: AR {T['ar']['wall']:.2f} SD {T['sd']['wall']:.2f} VIA {T['via']['wall']:.2f};"
        f" c={lat['c']:.3f} c_s={lat['c_s']:.3f} c_verify={lat['c_verify']:.3f}"
    )
    if lat["c"] > 0.5:
        pytest.skip(f"drafter/target cost ratio c={lat['c']:.2f} > 0.5")
    assert T["via"]["wall"] <= 1.10 * T["sd"]["wall"]
    assert T["sd"]["wall"] <= T["ar"]["wall"]
