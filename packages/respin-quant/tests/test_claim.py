"""The paper's claim on the tiny pre-trained Markov Llama with injected activation outliers:
W4A4 KV16, RTN weights with MSE clip, per-token asymmetric activations, lm_head FP; QuaRot and
every ReSpin arm share the rotation seed's Hadamard.

Margins asserted per rotation seed:
  PPL(RTN) >= 1.5 PPL(QuaRot); PPL(ReSpin, full) <= 0.99 PPL(QuaRot);
  PPL(ReSpin, r=32) <= 0.99 PPL(QuaRot) (a 1 % margin on top of "ReSpin r=32 beats QuaRot");
  PPL(ReSpin, full) <= PPL(ReSpin, r=32) + 0.02; PPL(ReSpin, r=0) > PPL(ReSpin, r=32).
SpinQuant-global < QuaRot is deliberately not asserted (on this tiny model it is not a stable
direction); the bench records it.

Protocol: 100 Cayley steps, lr 1.5 cosine (SpinQuant's), batch 16 of the 128 calibration
sequences, weight clip grid of 9 ratios 1.0 -> 0.6.
Calibration run (this machine, cold): seed 11 QuaRot 3.851, ReSpin full 3.166, r=32 3.203,
r=0 3.349; seed 12 QuaRot 3.540, full 3.179, r=32 3.208, r=0 3.355; RTN 13.13; FP 2.660.
"""

from __future__ import annotations

import pytest
import torch
from respin_quant.baselines import quantized_arm
from respin_quant.config import QuantConfig, RotationConfig
from respin_quant.evaluate import perplexity
from respin_quant.learn import learn_rotations
from respin_quant.rotation import init_rotations
from respin_quant.tiny import calib_ids, eval_ids, outlier_model

LR = 1.5
SEEDS = (11, 12)


_SHARED: dict[tuple[float, int], dict] = {}


def _base(scale: float, bits: int) -> dict:
    """Outlier model, data and the seed-independent arms (FP, RTN), once per setting."""
    key = (scale, bits)
    if key not in _SHARED:
        model, ev, cal = outlier_model(scale), eval_ids(), calib_ids()
        q = QuantConfig(w_bits=bits, a_bits=bits, w_clip_grid=9, w_clip_min=0.6)
        ppl = lambda m: perplexity(m, ev, seqlen=ev.shape[1], batch_size=64)  # noqa: E731
        _SHARED[key] = dict(
            model=model,
            cal=cal,
            q=q,
            ppl=ppl,
            fp=ppl(model),
            rtn=ppl(quantized_arm(model, q, None)),
        )
    return _SHARED[key]


def _run(scale: float, bits: int, seed: int) -> dict[str, float]:
    torch.set_num_threads(1)
    b = _base(scale, bits)
    model, cal, q, ppl = b["model"], b["cal"], b["q"], b["ppl"]
    rot = RotationConfig(
        steps=100,
        lr=LR,
        batch_size=16,
        calib_nsamples=cal.shape[0],
        calib_seqlen=cal.shape[1],
        rotation_seed=seed,
    )
    rs = learn_rotations(model, cal, rot, q)
    res = {
        "fp": b["fp"],
        "rtn": b["rtn"],
        "quarot": ppl(quantized_arm(model, q, init_rotations(model, "quarot", seed))),
        "respin_full": ppl(quantized_arm(model, q, rs, residual_rank="full")),
        "respin_r32": ppl(quantized_arm(model, q, rs, residual_rank=32)),
        "respin_r0": ppl(quantized_arm(model, q, rs, residual_rank=0)),
        "drift": rs.info["rel_drift_mean"],
        "learn_s": rs.info["seconds"],
    }
    print(
        f"\nW{bits}A{bits} S={scale:g} seed {seed}: "
        + ", ".join(f"{k} {v:.4f}" for k, v in res.items())
    )
    return res


def margins(r: dict[str, float]) -> dict[str, float]:
    """Claim value minus threshold for each assertion (positive: passes)."""
    return {
        "rtn-1.5quarot": r["rtn"] - 1.5 * r["quarot"],
        "0.99quarot-full": 0.99 * r["quarot"] - r["respin_full"],
        "0.99quarot-r32": 0.99 * r["quarot"] - r["respin_r32"],
        "r32+0.02-full": r["respin_r32"] + 0.02 - r["respin_full"],
        "r0-r32": r["respin_r0"] - r["respin_r32"],
    }


def _assert_claim(r: dict[str, float]) -> None:
    print("margins: " + ", ".join(f"{k} {v:+.4f}" for k, v in margins(r).items()))
    assert r["rtn"] >= 1.5 * r["quarot"]
    assert r["respin_full"] <= 0.99 * r["quarot"]
    assert r["respin_r32"] <= 0.99 * r["quarot"]
    assert r["respin_r32"] <= r["quarot"]
    assert r["respin_full"] <= r["respin_r32"] + 0.02
    assert r["respin_r0"] > r["respin_r32"]


@pytest.mark.claim
@pytest.mark.slow
@pytest.mark.parametrize(
    "seed", [pytest.param(s, marks=() if s == SEEDS[0] else pytest.mark.extended) for s in SEEDS]
)
def test_respin_beats_quarot_w4a4(tiny_dir, seed):
    """W4A4, S = 50. Default tier: seed 11; seed 12 is extended (each seed costs about 40 s of
    CPU, and the default suite has a 3-minute budget).

    Measured margins (value minus threshold, PPL; rtn-1.5quarot / 0.99quarot-full /
    0.99quarot-r32 / r32+0.02-full / r0-r32):
      cold build LLMCORE_ZOO_THREADS=1, 2026-12-01: seed 11 +7.188 / +0.573 / +0.538 / +0.055 /
      +0.175; seed 12 +7.341 / +0.445 / +0.403 / +0.061 / +0.162.
      first build (2026-11-29, the README table): seed 11 +7.358 / +0.647 / +0.610 / +0.057 /
      +0.146; seed 12 +7.824 / +0.326 / +0.297 / +0.049 / +0.147.
      LLMCORE_ZOO_THREADS=2: not measured (the 2-thread cold build was stopped unfinished: on a
      loaded 2-core machine it needed ~175 s of CPU for 100 of 800 steps, 1-thread ~30 s). Spread between the two builds: at most 0.12 on the
      0.99-QuaRot margins (QuaRot itself moves by 0.07-0.14), 0.012 on r32+0.02-full, 0.03 on
      r0-r32; every margin is at least 2.5x its spread.
    """
    _assert_claim(_run(50.0, 4, seed))


@pytest.mark.claim
@pytest.mark.slow
@pytest.mark.extended
@pytest.mark.parametrize("seed", (11,))
def test_respin_beats_quarot_w3a3(tiny_dir, seed):
    """W3A3, S = 20 (extended).

    Measured margins (same order as W4A4), seed 11: cold build LLMCORE_ZOO_THREADS=1,
    2026-12-01: +6.538 / +0.892 / +0.846 / +0.067 / +0.268; first build (2026-11-29): +7.051 /
    +0.660 / +0.591 / +0.089 / +0.315.
    """
    _assert_claim(_run(20.0, 3, seed))
