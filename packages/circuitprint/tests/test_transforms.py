"""Transformations and baselines: exactness and invariance properties."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from circuitprint import baselines as B
from circuitprint import transforms as T
from circuitprint.errors import MergeError
from conftest import make_llama
from hypothesis import given, settings
from hypothesis import strategies as st


@pytest.fixture(scope="module")
def pair():
    return make_llama(seed=0), make_llama(seed=1)


def test_permutation_preserves_function_and_breaks_pcs(pair):
    a, _ = pair
    ids = torch.randint(3, 48, (3, 9), generator=torch.Generator().manual_seed(0))
    p = T.permute_neurons(a, seed=4)
    torch.testing.assert_close(p(input_ids=ids).logits, a(input_ids=ids).logits, atol=1e-5, rtol=0)
    assert B.pcs(a, p) < 0.5 < B.pcs(a, copy.deepcopy(a))
    assert B.huref_ics(a, p) == pytest.approx(1.0, abs=1e-4)


def test_merges(pair):
    a, b = pair
    lin = T.merge_linear([a, b], [0.5, 0.5])
    sa, sb, sl = a.state_dict(), b.state_dict(), lin.state_dict()
    k = "model.layers.0.mlp.up_proj.weight"
    torch.testing.assert_close(sl[k], 0.5 * sa[k] + 0.5 * sb[k])
    ta = T.merge_task_arithmetic(a, [b], lam=1.0)
    torch.testing.assert_close(ta.state_dict()[k], sb[k])
    ties = T.merge_ties(a, [b, b], density=1.0)
    torch.testing.assert_close(ties.state_dict()[k], sb[k], atol=1e-6, rtol=0)
    other = make_llama(hidden=48)
    with pytest.raises(MergeError, match="differs"):
        T.merge_linear([a, other], [0.5, 0.5])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-3, 3, allow_nan=False), min_size=6, max_size=6),
       st.lists(st.floats(-3, 3, allow_nan=False), min_size=6, max_size=6),
       st.sampled_from([0.34, 0.5, 1.0]))  # fmt: skip
def test_ties_sign_election_and_disjoint_mean(x, y, density):
    tx, ty = torch.tensor(x), torch.tensor(y)  # float32, as the weights are
    d = T.ties_delta([tx, ty], density)
    x, y = tx.tolist(), ty.tolist()
    for i in range(6):
        if d[i] != 0:  # every kept entry follows the elected sign and lies within the inputs
            assert min(x[i], y[i]) - 1e-6 <= d[i] <= max(x[i], y[i]) + 1e-6
    if density == 1.0:
        for i in range(6):
            if x[i] * y[i] > 0:
                assert d[i] == pytest.approx((x[i] + y[i]) / 2, abs=1e-5)


def test_int8_and_pruning(pair):
    a, _ = pair
    ids = torch.randint(3, 48, (2, 7), generator=torch.Generator().manual_seed(1))
    q = T.quantize_int8(a)
    assert any(isinstance(m, T.Int8Linear) for m in q.modules())
    ref = a(input_ids=ids).logits
    assert (q(input_ids=ids).logits - ref).abs().max() < 0.05 * ref.abs().max()
    p = T.prune_magnitude(a, 0.2)
    w = p.model.layers[0].mlp.up_proj.weight
    assert abs((w == 0).float().mean().item() - 0.2) < 0.01
    with pytest.raises(MergeError, match="prune fraction"):
        T.prune_magnitude(a, 1.5)


def test_lora_missing_targets_is_an_error(pair, task_tok):
    with pytest.raises(MergeError, match="absent"):
        T.lora_finetune(pair[0], task_tok, ["F1 S1 R1 = A1"], lr=1e-3, steps=1,
                        target_modules=["c_attn"])  # fmt: skip


def test_mergekit_yaml_round_trip():
    import yaml

    y = yaml.safe_load(T.mergekit_config("ties", "base", ["m1", "m2"], density=0.5))
    assert y["merge_method"] == "ties" and y["base_model"] == "base"
    assert [m["parameters"]["density"] for m in y["models"]] == [0.5, 0.5]
    with pytest.raises(MergeError):
        T.mergekit_config("slerpx", "b", ["m"])


def test_cka_identities():
    x = torch.randn(20, 8, generator=torch.Generator().manual_seed(0))
    assert B.linear_cka(x, x) == pytest.approx(1.0, abs=1e-5)
    assert B.linear_cka(x, 3 * x @ torch.linalg.qr(torch.randn(8, 8))[0]) == pytest.approx(
        1.0, abs=1e-4
    )


def test_mergekit_ties_matches_in_package(tmp_path, task_tok):
    """The mergekit extra's TIES (YAML from ``mergekit_config``) against ``merge_ties``."""
    pytest.importorskip("mergekit")
    from transformers import AutoModelForCausalLM

    base = make_llama(vocab=len(task_tok), seed=0)
    parts = [copy.deepcopy(base) for _ in range(2)]
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in parts:
            for p in m.parameters():
                p.add_(0.02 * torch.randn(p.shape, generator=g))
    paths = []
    for i, m in enumerate([base, *parts]):
        d = tmp_path / f"m{i}"
        m.save_pretrained(d)
        task_tok.save_pretrained(d)
        paths.append(str(d))
    out = T.run_mergekit(T.mergekit_config("ties", paths[0], paths[1:], density=0.5),
                         str(tmp_path / "out"))  # fmt: skip
    mk = AutoModelForCausalLM.from_pretrained(out).eval()
    ours = T.merge_ties(base, parts, density=0.5)
    k = "model.layers.0.mlp.up_proj.weight"
    diff = (mk.state_dict()[k] - ours.state_dict()[k]).abs().max().item()
    assert diff < 1e-3, diff


def test_weight_baselines_dequantise_int8(pair):
    """PCS and HuRef compare an int8 copy through its dequantised weights: finite, close to 1
    against its float original, and the same against an unrelated model as the float one."""
    from circuitprint.baselines import huref_ics, pcs

    a, b = pair
    q = T.quantize_int8(a)
    for fn in (pcs, huref_ics):
        s = fn(a, q)
        assert math.isfinite(s) and s > 0.999
        assert abs(fn(q, b) - fn(a, b)) < 0.01
