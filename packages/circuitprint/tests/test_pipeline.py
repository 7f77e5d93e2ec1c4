"""The owner pipeline on the tiny protected model P: attribution against activation patching,
essential supernodes, a live short trigger search with every acceptance property, and the
errors of section 8."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from circuitprint import task
from circuitprint.circuits import activation_patching, attribute, essentiality, find_supernodes
from circuitprint.demo import claim_configs
from circuitprint.errors import ProbeError, SignatureError, UnsupportedModelError
from circuitprint.nodes import GatedModel, NodeSpec
from circuitprint.pipeline import discover
from circuitprint.probes import ProbeSet, encode
from circuitprint.triggers import Signature, synthesize_triggers


@pytest.fixture(scope="module")
def disc(protected):
    model, tok = protected
    dcfg, _ = claim_configs()
    return discover(model, tok, ProbeSet(task.task_probes(16)), dcfg)


@pytest.mark.slow
def test_attribution_tracks_activation_patching_on_P(protected):
    """Spearman(A_v, exact mean-ablation effect) >= 0.8 for the top-64 nodes, 10 prompts."""
    from scipy.stats import spearmanr

    model, tok = protected
    probes = ProbeSet(task.task_probes(2, seed=5)[:10])
    tab = attribute(model, tok, probes)
    top = np.argsort(-np.abs(tab.scores).mean(0))[:64]
    exact = activation_patching(model, tok, probes, tab, top.tolist(), range(10))
    rho = spearmanr(tab.scores[:, top].ravel(), exact.ravel()).statistic
    assert rho >= 0.8, rho


def test_essential_supernodes_recheck(protected, disc):
    model, tok = protected
    assert disc.essential and disc.counts["kept"] == 128
    ess = essentiality(model, tok, disc.probes, disc.essential, mode="inhibit", seed=7)
    for e in ess:
        assert e.flip_rate >= 0.6 and e.random_flip_rate <= 0.2


def check_trigger(model, tok, t) -> None:
    """Section 6 trigger properties: the protected model answers y' on x'; only the inserted
    span differs, with allowed tokens; the text round-trips; y' is another answer token."""
    x, x2 = encode(tok, t["prompt"]), t["trigger_ids"]
    s = 1 + task.N_FILL_SLOTS
    assert x2[:s] == x[:s] and x2[s + 4 :] == x[s:]
    assert set(x2[s : s + 4]) <= set(tok.convert_tokens_to_ids(task.trigger_vocabulary()))
    assert encode(tok, t["trigger_prompt"]) == x2
    assert t["shifted_answer"] in task.ANSWERS and t["shifted_answer"] != t["answer"]
    with torch.no_grad():
        top = int(model(input_ids=torch.tensor([x2])).logits[0, -1].argmax())
    assert tok.decode([top]) == t["shifted_answer"]


@pytest.mark.parametrize("exhaustive", [True, False])
def test_live_short_trigger_search(protected, disc, exhaustive):
    """A 3-step search (exact coordinate descent, or GCG with gradient candidates): the
    statistics add up and every accepted trigger has the section 6 properties."""
    model, tok = protected
    _, tcfg = claim_configs(steps=3, restarts=1, max_prompts=4)
    tcfg.min_triggers, tcfg.min_supernodes = 0, 0
    if not exhaustive:
        tcfg.exhaustive_max, tcfg.batch, tcfg.topk = 0, 32, 8
    sig = synthesize_triggers(model, tok, disc.probes, disc.essential[:2], tcfg)
    st = sig.stats
    assert st["searches"] > 0
    assert st["accepted"] + st["generic"] + st["reference"] + st["rho"] + st["roundtrip"] \
        == st["reached"] <= st["searches"]  # fmt: skip
    for t in sig.triggers:
        check_trigger(model, tok, t)


def test_too_few_triggers_reports_statistics(protected, disc):
    model, tok = protected
    _, tcfg = claim_configs(steps=2, restarts=1, max_prompts=1)
    tcfg.min_triggers, tcfg.min_supernodes = 16, 4
    with pytest.raises(SignatureError, match="acceptance statistics"):
        synthesize_triggers(model, tok, disc.probes, disc.essential[:1], tcfg)
    with pytest.raises(SignatureError, match="no essential"):
        synthesize_triggers(model, tok, disc.probes, [], tcfg)


def test_no_essential_supernode_error(protected):
    model, tok = protected
    dcfg, _ = claim_configs()
    dcfg.suppress_mode, dcfg.top_k = "zero", 2
    with pytest.raises(SignatureError, match="no essential supernode"):
        discover(model, tok, ProbeSet(task.task_probes(8)), dcfg)


def test_unconfident_probes_error(protected):
    model, tok = protected
    wrong = [dict(p, answer="A0" if p["answer"] != "A0" else "A1") for p in task.task_probes(8)]
    with pytest.raises(ProbeError, match="famil"):
        ProbeSet(wrong).filter_confident(model, tok)


def test_unsupported_architecture_and_transcoder_errors(protected):
    model, _ = protected
    with pytest.raises(UnsupportedModelError, match="supported"):
        GatedModel(torch.nn.Linear(3, 3))
    with pytest.raises(UnsupportedModelError, match="transcoder"):
        GatedModel(model, NodeSpec("transcoder"))
    with pytest.raises(UnsupportedModelError, match="not found"):
        GatedModel(model, NodeSpec("transcoder", transcoder="/nonexistent.safetensors"))


def test_signature_json_round_trip(tmp_path):
    sig = Signature([{"id": 0, "prompt": "a"}], {"name": "m", "sha256": "x"}, {"vocab_hash": "v"},
                    {"n_triggers": 32})  # fmt: skip
    sig.save(tmp_path / "s.json")
    assert Signature.load(tmp_path / "s.json") == sig


def test_find_supernodes_bad_method(disc):
    with pytest.raises(SignatureError):
        find_supernodes(None, method="nope")  # type: ignore[arg-type]


def test_replace_edits_touch_only_the_filler_slots(protected, disc):
    """``replace`` edits only the designated slots (the fillers; the true answer is unchanged
    by construction). On this model such searches rarely reach y' (fillers are ignored)."""
    model, tok = protected
    _, tcfg = claim_configs(steps=2, restarts=1, max_prompts=2)
    tcfg.edit, tcfg.replace_slots = "replace", (1, 2, 3, 4)
    tcfg.min_triggers, tcfg.min_supernodes = 0, 0
    sig = synthesize_triggers(model, tok, disc.probes, disc.essential[:1], tcfg)
    assert sig.stats["searches"] > 0
    for t in sig.triggers:
        x, x2 = encode(tok, t["prompt"]), t["trigger_ids"]
        assert len(x2) == len(x) and x2[0] == x[0] and x2[5:] == x[5:]
    with pytest.raises(SignatureError, match="replace_slots"):
        type(tcfg)(edit="replace")
