"""Extended tier (opt-in, ``-m extended``): more independent seeds, more P seeds, the
original lr 5e-4 derivative recipe, aggressive fine-tuning and Instructional Fingerprinting.
These report numbers; their assertions are the directions only (or, where the measured
outcome is a failure, that the failure is the clear error)."""

from __future__ import annotations

import pytest
from circuitprint import task, tiny
from circuitprint.demo import claim_configs
from circuitprint.pipeline import cached_signature
from circuitprint.probes import ProbeSet
from circuitprint.verify import HFSuspect, verify

pytestmark = [pytest.mark.extended, pytest.mark.slow]


def _signature(p, refs):
    dcfg, tcfg = claim_configs()
    # the claim's settings, so the claim's cached signature is reused for P
    tcfg.min_triggers, tcfg.min_supernodes, tcfg.max_share = 16, 2, 0.5
    return cached_signature(p, ProbeSet(task.task_probes(16)), dcfg, tcfg, references=refs)


def test_more_independent_models_stay_independent(zoo_models):
    sig = _signature(zoo_models["P"], [zoo_models["I1"]])
    tok = zoo_models["P"].load()[1]
    for seed in (2, 4):
        v = verify(sig, HFSuspect(tiny.build_base(seed).load()[0], tok))
        print(f"I{seed}: {v.verdict} TMR {v.tmr:.2f}")
        assert v.tmr <= 0.25


@pytest.mark.parametrize("seed", [1, 2])
def test_other_protected_seeds_reported(seed):
    """Report only: P trained with seeds 11 and 12, each with its own signature (I1 as the
    reference, I3 as the independent). Measured: neither yields a signature (seed 11: the
    searches that reach y' all shift to the masked-subject answer; seed 12: no search reaches
    y'), so the outcome is recorded rather than asserted. What must hold either way: a
    signature verifies its own P above I3, and a failure is the "too few triggers" error with
    its acceptance statistics."""
    from circuitprint.errors import SignatureError

    p = tiny.build_base(10 + seed)
    try:
        sig = _signature(p, [tiny.build_base(1)])
    except SignatureError as e:
        msg = str(e)
        print(f"P seed {10 + seed}: no signature: {msg}")
        assert "pass the rules" in msg and "acceptance statistics" in msg
        assert "'searches':" in msg and "'reached':" in msg
        return
    tok = p.load()[1]
    vp = verify(sig, HFSuspect(p.load()[0], tok))
    vi = verify(sig, HFSuspect(tiny.build_base(3).load()[0], tok))
    print(f"P seed {10 + seed}: {len(sig.triggers)} triggers; P TMR {vp.tmr:.2f}, "
          f"I3 TMR {vi.tmr:.2f}")  # fmt: skip
    assert vp.tmr > vi.tmr


@pytest.mark.parametrize(("lr", "steps"), [(5e-4, 500), (3e-3, 2000)])
def test_aggressive_finetunes_reported(zoo_models, lr, steps):
    """Reported beside the claim: lr 5e-4 (the original derivative recipe) and aggressive FT."""
    sig = _signature(zoo_models["P"], [zoo_models["I1"]])
    ft = tiny.build_finetune(zoo_models["P"], half=0, seed=1, lr=lr, steps=steps)
    m, tok = ft.load()
    v = verify(sig, HFSuspect(m, tok))
    print(f"FT lr {lr:g} x {steps}: {v.verdict} TMR {v.tmr:.2f}")
    assert 0.0 <= v.tmr <= 1.0


def test_instructional_fingerprint_implant(zoo_models):
    from circuitprint import transforms
    from circuitprint.baselines import InstructionalFingerprint

    p, tok = zoo_models["P"].load()
    ifp = InstructionalFingerprint(output="A0")
    vocab = task.FILLERS + task.RELATIONS
    im = ifp.implant(p, tok, [ex.document for ex in task.sample_examples(60, seed=3)], vocab)
    fsr = ifp.fsr(im, tok, vocab)
    ev = task.sample_examples(256, seed=98)
    drop = tiny.task_accuracy(p, tok, ev) - tiny.task_accuracy(im, tok, ev)
    transforms.finetune(im, tok, [ex.document for ex in task.shifted_examples(4000, half=0,
                        seed=1)], lr=1e-4, steps=500, seed=1)  # fmt: skip
    print(f"IF: FSR {fsr:.2f}, after FT {ifp.fsr(im, tok, vocab):.2f}, accuracy drop {drop:.3f}")
    assert fsr >= 0.8 and ifp.fsr(p, tok, vocab) <= 0.2


def test_demo_on_demo_size_models():
    """`llmcore demo circuitprint` on its own demo-size models (built or cached): a signature,
    P derived, the independent model not."""
    from circuitprint import demo

    out = demo.run(use_fixtures=False)
    print(out)
    assert out["models"] == "demo" and out["n_triggers"] >= 4
    assert out["P_verdict"] == "derived" and out["I_verdict"] != "derived"
