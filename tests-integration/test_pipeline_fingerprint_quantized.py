"""Pipeline 6, a fingerprint survives quantization (circuitprint + respin-quant; recipe:
docs/recipes/fingerprint-survives-quantization.md).

circuitprint's signature of its protected two-hop model P (the claim signature: 16 triggers
from 2 supernodes, reference I1) is verified black-box on P's W4A4 ReSpinQuant copy, which must
come out ``derived``, and on the independent model I3 and on I3's own W4A4 copy, which must
come out ``independent``: quantization neither erases the fingerprint nor manufactures one.

Calibration (rotation seeds 0, 1, 2; 20 Cayley steps, rank 16, 128 task windows of 40 tokens;
2026-12-01): TMR of quantized P 0.69 / 0.81 / 1.00 (P itself 1.00; QuaRot-style W4A4 0.94 /
0.94 / 0.88), every one ``derived`` at p <= 1e-3; I3 and its W4A4 copies 0.19 (QuaRot 0.12 -
0.19), ``independent``; greedy agreement of P and its W4A4 copy 1.00 on 300 clean prompts.
The default tier uses seed 0, the lowest TMR: 11 of 16 triggers, 3 above the 0.5 TMR floor.
"""

from __future__ import annotations

import copy

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SEQLEN = 40


def w4a4_respin(model, tok, rotation_seed: int = 0):
    """A W4A4 ReSpinQuant copy of ``model`` calibrated on two-hop task documents."""
    import torch
    from circuitprint import task
    from respin_quant import QuantConfig, RotationConfig, quantize_pipeline

    ids: list[int] = []
    for ex in task.sample_examples(600, seed=5):
        doc = tok(ex.document, add_special_tokens=False)["input_ids"]
        ids += [tok.bos_token_id, *doc, tok.eos_token_id]
    n = len(ids) // SEQLEN
    calib = torch.tensor(ids[: n * SEQLEN]).view(n, SEQLEN)[:128]
    rot = RotationConfig(
        method="respin",
        residual_rank=16,
        steps=20,
        batch_size=16,
        rotation_seed=rotation_seed,
        calib_nsamples=128,
        calib_seqlen=SEQLEN,
    )
    q, _ = quantize_pipeline(
        copy.deepcopy(model), tok, QuantConfig(w_bits=4, a_bits=4), rot, calib_dataset=calib
    )
    return q


@pytest.fixture(scope="module")
def verdicts():
    from circuitprint import fixtures, task
    from circuitprint.baselines import output_agreement
    from circuitprint.demo import claim_configs
    from circuitprint.pipeline import cached_signature
    from circuitprint.probes import ProbeSet
    from circuitprint.verify import HFSuspect, verify

    p_entry, i1_entry = fixtures.build_protected(), fixtures.build_independent_1()
    # circuitprint's claim signature (same settings as its claim test, so the same cache entry)
    dcfg, tcfg = claim_configs()
    tcfg.min_triggers, tcfg.min_supernodes, tcfg.max_share = 16, 2, 0.5
    probes = ProbeSet(task.task_probes(16, seed=0))
    sig = cached_signature(p_entry, probes, dcfg, tcfg, references=[i1_entry])
    p, tok = p_entry.load()
    i3, _ = fixtures.build_independent_3().load()
    models = {"P": p, "P-W4A4": w4a4_respin(p, tok), "I3": i3, "I3-W4A4": w4a4_respin(i3, tok)}
    out = {k: verify(sig, HFSuspect(m, tok)) for k, m in models.items()}
    clean = [ex.prompt for ex in task.sample_examples(300, seed=77)]
    agreement = output_agreement(p, models["P-W4A4"], tok, clean)
    print(f"\nfingerprint-survives-quantization: {len(sig.triggers)} triggers")
    for k, v in out.items():
        print(f"  {k}: {v.verdict} TMR={v.tmr:.3f} p={v.p_value:.2e} usable={v.n_usable}")
    print(f"  greedy agreement P vs P-W4A4 on 300 clean prompts: {agreement:.3f}")
    return out, agreement


def test_signature_verifies_on_the_w4a4_copy(verdicts):
    v, agreement = verdicts
    assert v["P"].verdict == "derived"
    assert v["P-W4A4"].verdict == "derived"
    assert agreement >= 0.95  # the quantized copy is still the same model on clean inputs


def test_independent_model_stays_independent_quantized_or_not(verdicts):
    v, _ = verdicts
    assert v["I3"].verdict == "independent"
    assert v["I3-W4A4"].verdict == "independent"
