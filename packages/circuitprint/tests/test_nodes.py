"""Exactness and property tests of gates, attribution, circuits and supernodes."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from circuitprint import task
from circuitprint.circuits import (
    activation_patching,
    attribute,
    discover_circuits,
    find_supernodes,
    suppress,
)
from circuitprint.nodes import GatedModel, NodeSpec, Transcoder
from circuitprint.probes import ProbeSet
from conftest import make_llama


def _ids(tok, n=6, seed=0):
    from circuitprint.circuits import batch_ids

    items = task.task_probes(1, seed=seed)[:n]
    return batch_ids(tok, [i["prompt"] for i in items])[0]


@pytest.mark.parametrize("basis", ["neuron", "head", "transcoder"])
def test_all_ones_gates_are_bit_identical(basis, random_llama, task_tok, tmp_path):
    ids = _ids(task_tok)
    plain = random_llama(input_ids=ids).logits
    path = None
    if basis == "transcoder":
        path = str(tmp_path / "tc.safetensors")
        Transcoder.random(random_llama, 16).save(path)
    with GatedModel(random_llama, NodeSpec(basis, transcoder=path)) as gm:
        gates = {layer: torch.ones(*ids.shape, gm.n_units(layer)) for layer in gm.layers}
        logits, acts = gm.run(ids, gates=gates)
        logits2, _ = gm.run(ids)
    assert torch.equal(logits, plain) and torch.equal(logits2, plain)
    assert set(acts) == {0, 1}
    # hooks are gone after the block
    assert torch.equal(random_llama(input_ids=ids).logits, plain)


def test_zero_gate_equals_zeroed_down_proj_column(random_llama, task_tok):
    ids = _ids(task_tok)
    unit, layer = 5, 1
    manual = copy.deepcopy(random_llama)
    with torch.no_grad():
        manual.model.layers[layer].mlp.down_proj.weight[:, unit] = 0.0
    want = manual(input_ids=ids).logits
    with GatedModel(random_llama) as gm:
        g = torch.ones(*ids.shape, gm.n_units(layer))
        g[..., unit] = 0.0
        got, _ = gm.run(ids, gates={layer: g})
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    assert not torch.allclose(got, random_llama(input_ids=ids).logits)


def test_head_gate_zero_equals_zeroed_o_proj_columns(random_llama, task_tok):
    ids = _ids(task_tok)
    manual = copy.deepcopy(random_llama)
    d = manual.config.hidden_size // 4
    with torch.no_grad():
        manual.model.layers[0].self_attn.o_proj.weight[:, 2 * d : 3 * d] = 0.0
    with GatedModel(random_llama, NodeSpec("head")) as gm:
        g = torch.ones(*ids.shape, 4)
        g[..., 2] = 0.0
        got, _ = gm.run(ids, gates={0: g})
    torch.testing.assert_close(got, manual(input_ids=ids).logits, rtol=0, atol=1e-6)


def test_attribution_is_exact_on_a_linear_readout(task_tok):
    """One layer, final norm removed: the logit difference is linear in every last-position
    neuron, so attribution patching equals activation patching to float precision."""
    m = make_llama(vocab=len(task_tok), layers=1, seed=3, initializer_range=0.3)
    m.model.norm = torch.nn.Identity()
    probes = ProbeSet([dict(p, answer="A0") for p in task.task_probes(1, seed=1)][:4])
    tab = attribute(m, task_tok, probes)
    last = [j for j, n in enumerate(tab.nodes) if n[0] == "last"][:40]
    exact = activation_patching(m, task_tok, probes, tab, last, range(4))
    np.testing.assert_allclose(tab.scores[:4][:, last], exact, atol=2e-4)
    assert np.abs(exact).max() > 1e-3


def test_discover_circuits_mass_and_cap():
    from circuitprint.circuits import AttributionTable

    scores = np.array([[5.0, 3.0, 1.0, 1.0, -2.0], [0.0, 0.0, -1.0, 0.0, 0.0]])
    tab = AttributionTable([("last", 0, i) for i in range(5)], scores, scores, np.zeros(2),
                           ["a", "a"], [0, 0], [1, 1], {}, None, NodeSpec(), ["last"])  # fmt: skip
    c = discover_circuits(tab, mass=0.8, k_max=64)
    assert c.members[0].tolist() == [0, 1]  # 8 of 10 reached after two nodes
    assert c.members[1].tolist() == []
    assert discover_circuits(tab, mass=1.0, k_max=3).members[0].tolist() == [0, 1, 2]


def test_suppress_modes_and_supernode_clusters(random_llama, task_tok):
    probes = ProbeSet([dict(p, answer="A0") for p in task.task_probes(2, seed=2)])
    tab = attribute(random_llama, task_tok, probes)
    circ = discover_circuits(tab, k_max=16)
    sns = find_supernodes(tab, circ, backbone_frac=0.0, sim=0.0)
    assert sns
    for s in sns:
        layers = {la for la, _ in s.nodes}
        assert max(layers) - min(layers) <= 1 and s.role in ("subject", "last")
    top = find_supernodes(tab, method="topk", top_k=8)
    assert all(len(s.nodes) <= 8 for s in top) and len(top) <= 2 * 8
    ids = _ids(task_tok, 3)
    plain = random_llama(input_ids=ids).logits
    sn = top[0]
    pos = probes[0].roles[sn.role]
    outs = {}
    for mode in ("zero", "mean", "inhibit"):
        with suppress(random_llama, sn, mode, positions=pos):
            outs[mode] = random_llama(input_ids=ids).logits
        assert torch.equal(outs[mode][:, :pos], plain[:, :pos])  # causal: earlier untouched
    assert not torch.allclose(outs["zero"], outs["inhibit"])
    assert torch.equal(random_llama(input_ids=ids).logits, plain)
