"""Pipeline 1, quantize then speculate (respin-quant + via-sd; recipe:
docs/recipes/quantize-then-speculate.md).

via-sd's 8-layer list-language target is quantized to W4A4 by ReSpinQuant (learned rotations
fused into the weights, rank-32 residual transitions online, RTN weights, per-token activations)
and decoded with via-sd's full-precision 2-layer drafter. Greedy speculative decoding and
VIA-SD with every draft escalated to the target are lossless, so both must reproduce greedy
decoding of the *quantized* model token for token; the quantized target must still save target
forwards under speculation. Acceptance and target forwards are reported beside the
full-precision target's.

Calibration (2026-12-01; ReSpin rank 32, 20 Cayley steps on 64 corpus windows of 48 tokens,
rotation seed 0; gamma 5, 48 new tokens, greedy): the exactness assertions are equalities and
held on all 8 default-tier prompts and all 64 extended ones. Default tier: target forwards SD
86 vs AR 233 on the W4A4 target (full-precision SD 87), acceptance 0.731 vs 0.726; W4A4 exact
match 0.625 vs 1.000 for the full-precision target, so the outputs differ. Extended (64
prompts): SD 631 vs AR 1,762 target forwards, acceptance 0.744 (W4A4) vs 0.743, VIA-SD at its
default gates 408 forwards at exact match 0.625 (W4A4 AR 0.703, full precision 0.938).
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

N_PROMPTS = 8
MAX_NEW = 48
SEQLEN = 48
CAYLEY_STEPS = 20


def _calibration_ids(tok, docs, seqlen: int, n: int):
    """``n`` windows of ``seqlen`` tokens cut from the concatenated training documents."""

    stream = tok("\n".join(docs), add_special_tokens=False, return_tensors="pt").input_ids[0]
    k = min(n, stream.numel() // seqlen)
    return stream[: k * seqlen].view(k, seqlen)


def _totals(results) -> dict[str, float]:
    keys = ("tokens", "target_forwards", "drafted", "rejections", "tier_c", "wall_time_s")
    t = {k: float(sum(getattr(r.stats, k) for r in results)) for k in keys}
    t["acceptance"] = 1.0 - t["rejections"] / t["drafted"] if t["drafted"] else 0.0
    return t


def _quantized_target(target_entry, tok):
    """The W4A4 ReSpinQuant copy of the target, built once per machine as a zoo entry (a
    ``save_quantized`` directory: packed 4-bit codes, rotations, transitions) and loaded with
    ``load_quantized``. Keyed by the target's key, the settings and respin-quant's code."""
    from dataclasses import asdict

    from respin_quant import (
        QuantConfig,
        RotationConfig,
        load_quantized,
        quantize_pipeline,
        save_quantized,
    )
    from via_sd.tiny import list_corpus

    from llmcore import zoo

    q = QuantConfig(w_bits=4, a_bits=4)  # RTN weights (clip search), per-token activations
    rot = RotationConfig(
        method="respin",
        residual_rank=32,
        steps=CAYLEY_STEPS,
        batch_size=8,
        calib_nsamples=64,
        calib_seqlen=SEQLEN,
        online_block=True,  # FFN 320 = 5 x 64: block Hadamard for the online H_down
    )
    material = {
        "target": target_entry.key,
        "quant": asdict(q),
        "rotation": asdict(rot),
        "calibration": {"docs": 1500, "windows": 64, "seqlen": SEQLEN},
        "code": zoo.code_digest("respin_quant"),
    }

    def make(out):
        model, _ = target_entry.load()
        calib = _calibration_ids(tok, list(list_corpus().train)[:1500], SEQLEN, 64)
        model, report = quantize_pipeline(model, tok, q, rot, calib_dataset=calib)
        save_quantized(model, out, report=report, tokenizer=tok)
        return {k: v for k, v in report.items() if isinstance(v, int | float | str)}

    entry = zoo.cached(
        "pipeline-via-sd-target-w4a4-respin",
        material,
        make,
        progress=False,
        description="via-sd's target, W4A4 ReSpinQuant (integration pipeline)",
    )
    return load_quantized(entry.path), dict(entry.metrics)


@pytest.fixture(scope="module")
def models():
    from via_sd.tiny import build_target, drafter_recipe

    from llmcore import zoo

    target_entry = build_target(progress=False)
    target, tok = target_entry.load()
    drafter, _ = zoo.build(drafter_recipe(), progress=False).load()
    qtarget, report = _quantized_target(target_entry, tok)
    print(f"\nquantize-then-speculate: W4A4 ReSpinQuant report {report}")
    return target, qtarget, drafter, tok


def decode_all(models, n_prompts: int, methods: tuple[str, ...]):
    """Greedy decodes of ``n_prompts`` held-out prompts: ``fp_sd`` (SD, full-precision target),
    ``ar``/``sd``/``via_all``/``via`` on the W4A4 target (``via_all``: every draft escalated)."""
    from via_sd import (
        SlimVerifier,
        ViaSDConfig,
        autoregressive_generate,
        speculative_generate,
        via_sd_generate,
    )
    from via_sd.tiny import eval_prompts, score

    target, qtarget, drafter, tok = models
    cfg = ViaSDConfig(gamma=5, max_new_tokens=MAX_NEW, eos_token_id=tok.eos_token_id)
    # tau > 1: no draft reaches either gate, so every one is verified by the target (tier C)
    escalate_all = ViaSDConfig(
        gamma=5,
        max_new_tokens=MAX_NEW,
        eos_token_id=tok.eos_token_id,
        tau_accept=1.01,
        tau_escalate=1.01,
    )
    slim = SlimVerifier(qtarget, skip_ratio=0.45)
    run = {
        "fp_ar": lambda ids: autoregressive_generate(target, ids, cfg),
        "fp_sd": lambda ids: speculative_generate(target, drafter, ids, cfg),
        "ar": lambda ids: autoregressive_generate(qtarget, ids, cfg),
        "sd": lambda ids: speculative_generate(qtarget, drafter, ids, cfg),
        "via_all": lambda ids: via_sd_generate(qtarget, drafter, slim, ids, escalate_all),
        "via": lambda ids: via_sd_generate(qtarget, drafter, slim, ids, cfg),
    }
    out: dict[str, list] = {m: [] for m in methods}
    correct = dict.fromkeys(methods, 0)
    for row in eval_prompts(n_prompts):
        ids = [tok.bos_token_id, *tok(row["prompt"], add_special_tokens=False)["input_ids"]]
        for m in methods:
            r = run[m](ids)
            out[m].append(r)
            text = tok.decode(r.new_tokens, skip_special_tokens=True)
            correct[m] += bool(score(text, row["reference"]))
    totals = {m: _totals(v) | {"exact_match": correct[m] / n_prompts} for m, v in out.items()}
    print(f"\nquantize-then-speculate, {n_prompts} prompts:")
    for k, t in totals.items():
        print(
            f"  {k}: tokens={t['tokens']:.0f} target_forwards={t['target_forwards']:.0f} "
            f"drafted={t['drafted']:.0f} acceptance={t['acceptance']:.3f} tier_c={t['tier_c']:.0f} "
            f"exact_match={t['exact_match']:.3f} wall={t['wall_time_s']:.1f}s"
        )
    return out, totals


def check_exact(out, totals) -> None:
    for ar, sd, via in zip(out["ar"], out["sd"], out["via_all"], strict=True):
        assert sd.new_tokens == ar.new_tokens
        assert via.new_tokens == ar.new_tokens
        assert via.stats.lossless
        assert via.stats.tier_c == via.stats.drafted  # every draft went to the W4A4 target
    assert totals["via_all"]["tier_c"] > 0


@pytest.fixture(scope="module")
def runs(models):
    return decode_all(models, N_PROMPTS, ("fp_sd", "ar", "sd", "via_all"))


def test_speculation_on_the_quantized_target_is_exact(runs):
    check_exact(*runs)


def test_quantized_target_differs_and_still_saves_forwards(runs):
    out, totals = runs
    # the pipeline really decodes another model than the full-precision target ...
    assert any(a.new_tokens != f.new_tokens for a, f in zip(out["ar"], out["fp_sd"], strict=True))
    # ... and speculation still spares most of its forwards
    assert totals["sd"]["target_forwards"] < totals["ar"]["target_forwards"]
    assert totals["ar"]["target_forwards"] == totals["ar"]["tokens"]


@pytest.mark.extended
def test_extended_64_prompts_with_via_sd(models):
    """The recipe's table: 64 prompts, full-precision AR and SD beside the W4A4 target's AR,
    SD, VIA-SD with everything escalated, and VIA-SD at its default gates (lossy)."""
    out, totals = decode_all(models, 64, ("fp_ar", "fp_sd", "ar", "sd", "via_all", "via"))
    check_exact(out, totals)
    assert totals["via"]["target_forwards"] < totals["sd"]["target_forwards"]
