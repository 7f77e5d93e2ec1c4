"""Exactness and property tests of the editors, metrics and retrieval gate (seconds each)."""

from __future__ import annotations

import pytest
import torch
from edit_collapse import metrics as M
from edit_collapse.config import EditConfig
from edit_collapse.editors import AlphaEditEditor, FTEditor, MEMITEditor, ROMEEditor
from edit_collapse.requests import world_requests

from llmcore.zoo import weights_digest

CTX = [[3, 2]]


def _stats_texts(w):
    return [f.sentence(t) for f in w.facts for t in range(3)]


def test_rome_update_is_rank_one(random_pair, small_world, tmp_path):
    model, tok = random_pair
    ed = ROMEEditor(EditConfig("ROME", layers=[1], context_template_length_params=CTX))
    h = ed.apply(model, tok, world_requests(small_world, 1))
    try:
        (name,) = h.originals
        dW = (model.get_parameter(name) - h.originals[name]).double()
        s = torch.linalg.svdvals(dW)
        assert float(s[0]) > 0 and float(s[1] / s[0]) < 1e-6
    finally:
        h.restore()


def test_rome_mom2_adjusted_update_is_rank_one(random_pair, small_world, tmp_path):
    model, tok = random_pair
    cfg = EditConfig(
        "ROME",
        layers=[1],
        context_template_length_params=CTX,
        mom2_adjustment=True,
        mom2_n_samples=400,
    )
    ed = ROMEEditor(cfg, stats_texts=_stats_texts(small_world), stats_cache_dir=tmp_path)
    h = ed.apply(model, tok, world_requests(small_world, 1))
    try:
        dW = next(iter(h.changed().values())).double() - next(iter(h.originals.values())).double()
        s = torch.linalg.svdvals(dW)
        assert float(s[1] / s[0]) < 1e-6
    finally:
        h.restore()


def test_alphaedit_update_is_in_null_space_of_preserved_keys(random_pair, small_world, tmp_path):
    """||dW K_0||_F / (||dW||_F ||K_0||_F) < 1e-3 on the preserved keys K_0: the statistics come
    from 5 short texts (fewer token keys than d_ff = 64), so their null space is exact."""
    from edit_collapse import core

    from llmcore.hooks import capture_activations

    model, tok = random_pair
    texts = _stats_texts(small_world)[:5]
    names = [f"model.layers.{i}.mlp.down_proj" for i in (0, 1)]
    ids, att = core.pad_right([core.encode(tok, t) for t in texts], tok.pad_token_id, "cpu")
    with torch.no_grad(), capture_activations(model, names, input=True) as acts:
        model(input_ids=ids, attention_mask=att)
    K0 = {n: acts[n][0][att.bool()].double() for n in names}
    assert K0[names[0]].shape[0] < 64
    cfg = EditConfig("AlphaEdit", layers=[0, 1], context_template_length_params=CTX, mom2_n_samples=10_000,
                     nullspace_threshold=1e-8)  # fmt: skip
    ed = AlphaEditEditor(cfg, stats_texts=texts, stats_cache_dir=tmp_path)
    h = ed.apply(model, tok, world_requests(small_world, 2), sequential=False)
    try:
        for n in names:
            dW = (model.get_parameter(n + ".weight") - h.originals[n + ".weight"]).double()
            assert dW.norm() > 0
            ratio = (dW @ K0[n].T).norm() / (dW.norm() * K0[n].norm())
            assert float(ratio) < 1e-3, (n, float(ratio))
    finally:
        h.restore()


@pytest.mark.parametrize("L2", [10.0, 0.36])
def test_alphaedit_solve_closed_form(L2):
    """AlphaEdit's solve for one key ``k`` and residual ``r`` with no earlier keys: the update
    writes ``Delta k = r |P k|^2 / (|P k|^2 + L2)`` (the share that made ``L2 = 10`` too large
    for small keys) and ``Delta K_0 = 0`` for keys in the complement of the null space; with
    ``K_p`` cached the update also leaves ``P``-projected earlier keys' outputs nearly fixed."""
    g = torch.Generator().manual_seed(0)
    d, d_out = 16, 5
    U, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    null, kept = U[:, :6], U[:, 6:]
    ed = AlphaEditEditor(EditConfig("AlphaEdit", layers=[0], L2=L2))
    ed._P[0] = (null @ null.T).float()
    k = torch.randn(1, d, generator=g)
    r = torch.randn(1, d_out, generator=g)
    delta = ed._solve(None, None, 0, k, r).double()  # [d_out, d_in]
    pk2 = float((k.double() @ null).pow(2).sum())
    assert torch.allclose(delta @ k.double().T, r.double().T * pk2 / (pk2 + L2), atol=1e-5)
    assert float((delta @ kept).abs().max()) < 1e-6
    ed.cache_c[0] = 1e4 * (null[:, :3] @ null[:, :3].T).float()  # a strong earlier key in P
    d2 = ed._solve(None, None, 0, k, r).double()
    assert float((d2 @ null[:, :3]).norm()) < 1e-2 * float((delta @ null[:, :3]).norm())


@pytest.mark.parametrize("cls,cfg", [
    (FTEditor, EditConfig("FT", layers=[1], num_steps=3)),
    (ROMEEditor, EditConfig("ROME", layers=[1], context_template_length_params=CTX, v_num_grad_steps=3)),
    (MEMITEditor, EditConfig("MEMIT", layers=[0, 1], context_template_length_params=CTX, v_num_grad_steps=3,
                             mom2_n_samples=300, mom2_update_weight=10)),
])  # fmt: skip
def test_restore_is_bit_identical_and_save_load_roundtrip(
    cls, cfg, random_pair, small_world, tmp_path
):
    from edit_collapse.editors import EditHandle

    model, tok = random_pair
    before = weights_digest(model)
    ed = cls(cfg, stats_texts=_stats_texts(small_world), stats_cache_dir=tmp_path)
    h = ed.apply(model, tok, world_requests(small_world, 2), sequential=True)
    edited = weights_digest(model)
    assert edited != before
    assert set(h.delta_norms()) == set(h.originals) and all(v > 0 for v in h.delta_norms().values())
    path = h.save(tmp_path / "d.safetensors")
    h.restore()
    assert weights_digest(model) == before
    h2 = EditHandle.load(model, path)
    assert weights_digest(model) == edited
    h2.restore()
    assert weights_digest(model) == before


def test_retrieval_never_changes_weights(random_pair, small_world):
    from edit_collapse.retrieval import RetrievalEditor, world_format
    from edit_collapse.session import run_edit_session

    model, tok = random_pair
    before = weights_digest(model)
    ed = RetrievalEditor(encoder="bm25", fmt=world_format())
    res = run_edit_session(ed, model, tok, world_requests(small_world, 4), eval_at=(1, 4))
    assert len(ed.memory) == 4 and weights_digest(model) == before
    res.handle.restore()
    assert ed.memory == []


@pytest.mark.parametrize("margin", [0.0, 0.05])
def test_gate_single_forward_matches_completion_logprobs(random_pair, small_world, margin):
    """The gate's one-forward path (next-token logits of the one-token answers) keeps exactly the
    facts that ``completion_logprobs`` of the yes and no completions keep, for any margin."""
    from edit_collapse.retrieval import RetrievalEditor, world_format

    from llmcore.metrics import completion_logprobs

    model, tok = random_pair
    ed = RetrievalEditor(encoder="bm25", fmt=world_format(), gate_margin=margin)
    facts = [f.sentence(0) for f in small_world.facts[:6]]
    query = small_world.facts[0].prompt(1)
    assert ed._answer_tokens(tok) is not None
    pairs = [
        (ed.fmt.gate.format(fact=f, query=query), a) for f in facts for a in (ed.fmt.yes, ed.fmt.no)
    ]
    lp = completion_logprobs(model, tok, pairs, reduce="sum")
    want = [f for i, f in enumerate(facts) if lp[2 * i] - lp[2 * i + 1] > margin]
    assert ed.relevant(model, tok, query, facts) == want
    assert ed.stats["gate_pairs"] == len(facts)


def test_teacher_forced_metrics_match_easyedit_formula():
    assert M.token_accuracy([5, 6, 7], [5, 0, 7]) == pytest.approx(2 / 3)
    assert M.locality_acc([1, 2], [1, 2]) == 1.0
    with pytest.raises(ValueError, match="length mismatch"):
        M.token_accuracy([1], [1, 2])
    row = {"rel": 1.0, "gen": 0.5, "loc": 0.25, "port": None}
    assert M.average(row) == pytest.approx(1.75 / 3)


def test_teacher_forced_acc_on_hand_made_logits(small_world):
    """A model whose logits are a fixed table: acc equals the hand-computed share."""
    from edit_collapse import world as W

    from llmcore.zoo import word_tokenizer

    tok = word_tokenizer(W.vocabulary(small_world))
    a, b, c = (tok.convert_tokens_to_ids(x) for x in ("paris", "rome", "oslo"))

    class Table(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, input_ids, attention_mask=None, **kw):
            logits = torch.zeros(*input_ids.shape, len(tok))
            logits[..., a] = 1.0  # always predicts "paris"
            return type("O", (), {"logits": logits})()

    m = Table()
    acc = M.teacher_forced_acc(m, tok, ["x lives in", "x lives in"], ["paris rome", "paris paris"])
    assert acc == [0.5, 1.0]
    assert b != c


def test_locality_uses_original_outputs_in_sequential_mode(random_pair, small_world):
    """After the first edit the locality reference stays the unedited model's argmax."""
    from edit_collapse.session import Evaluator

    model, tok = random_pair
    reqs = world_requests(small_world, 3)
    ev = Evaluator(model, tok, reqs)
    ref = dict(ev.loc_orig)
    ed = FTEditor(EditConfig("FT", layers=[2], num_steps=20, lr=5e-2))
    h = ed.apply(model, tok, reqs[:1])
    try:
        ev.evaluate(model, reqs)
        assert ev.loc_orig == ref
        locs = [(p, a) for r in reqs for ps in r.locality.values() for p, a in ps]
        now = M.target_argmax(model, tok, locs)
        changed = sum(pred != ref[(r.case_id, p)] for r in reqs for (p, _) in [x for ps in r.locality.values() for x in ps]
                      for pred, _ in [now[locs.index((p, _))]])  # fmt: skip
        rows = ev.evaluate(model, reqs)
        assert (changed == 0) == all(r["loc"] == 1.0 for r in rows)
    finally:
        h.restore()


@pytest.mark.parametrize(
    ("hook", "frozen"),
    [
        ("model.layers.1", ["model.layers.0", "model.layers.1"]),
        ("model.layers.1.mlp.down_proj", ["model.layers.0", "model.layers.1.mlp.down_proj"]),
    ],
)
def test_v_star_replay_is_bit_identical(random_pair, small_world, hook, frozen):
    """v*/z* with the blocks below the hooked module (and the module itself) replayed from one
    pass equals, bit for bit, v*/z* recomputing the whole forward in every step."""
    from edit_collapse import core

    model, tok = random_pair
    assert core.frozen_modules(model, hook) == frozen
    cfg = EditConfig("MEMIT", layers=[1], v_num_grad_steps=6, context_template_length_params=CTX)
    tpl = core.context_templates(model, tok, CTX, 0)
    reqs = world_requests(small_world, 2)
    full, init_full = core.optimize_target(model, tok, cfg, reqs, hook, tpl, replay=False)
    fast, init_fast = core.optimize_target(model, tok, cfg, reqs, hook, tpl, replay=True)
    assert torch.equal(full, fast) and torch.equal(init_full, init_fast)
    assert not torch.equal(full, init_full)  # the optimisation moved v*


def test_replay_outputs_skips_the_frozen_blocks(random_pair):
    from edit_collapse import core

    model, _ = random_pair
    ids = torch.randint(4, 20, (2, 7))
    att = torch.ones_like(ids)
    att[1, 5:] = 0
    calls: list[int] = []
    h = model.model.layers[0].self_attn.register_forward_hook(lambda *_: calls.append(1))
    try:
        with torch.no_grad():
            ref = model(input_ids=ids, attention_mask=att, use_cache=False).logits
            with core.replay_outputs(model, ["model.layers.0"], ids, att):
                n = len(calls)
                out = model(input_ids=ids, attention_mask=att, use_cache=False).logits
                assert len(calls) == n  # block 0 did not run
            model(input_ids=ids, attention_mask=att, use_cache=False)
    finally:
        h.remove()
    assert torch.equal(ref, out)
    assert len(calls) == n + 1  # restored after the context
    assert "forward" not in model.model.layers[0].__dict__


def test_ft_replay_matches_the_full_forward(random_pair, small_world):
    """FT in eval mode replays the blocks below the trained layer; in train mode (no dropout in
    this model) it recomputes them: the trained weights are bit-identical."""
    model, tok = random_pair
    cfg = EditConfig("FT", layers=[2], lr=5e-3, num_steps=5)
    req = world_requests(small_world, 1)
    name = cfg.rewrite_module_tmp or "model.layers.2.mlp.down_proj"
    got = []
    for train in (False, True):
        model.train(train)
        try:
            h = FTEditor(cfg).apply(model, tok, req)
            got.append(model.get_parameter(f"{name}.weight").detach().clone())
            h.restore()
        finally:
            model.eval()
    assert torch.equal(got[0], got[1])
    assert not torch.equal(got[0], h.originals[f"{name}.weight"])


def test_bm25_index_follows_the_memory(small_world):
    """The BM25 index is built once per memory state and rebuilt when the memory changes."""
    from edit_collapse.retrieval import Encoder

    docs = [f.sentence(0) for f in small_world.facts[:8]]
    more = docs + [f.sentence(0) for f in small_world.facts[8:16]]
    query = small_world.facts[10].prompt(1)
    enc = Encoder("bm25")
    first = enc.top_k(query, docs, 3)
    assert enc.top_k(query, docs, 3) == first == Encoder("bm25").top_k(query, docs, 3)
    assert enc.top_k(query, more, 3) == Encoder("bm25").top_k(query, more, 3)
    assert 10 in enc.top_k(query, more, 3)


def test_statistics_come_from_the_unedited_model(random_pair, small_world, tmp_path):
    """C_0 of every edited layer is of the unedited weights: computed before the first update,
    not when the second layer is reached after the first layer was already edited."""
    model, tok = random_pair
    texts = _stats_texts(small_world)[:40]
    cfg = EditConfig("MEMIT", layers=[0, 1], context_template_length_params=CTX, v_num_grad_steps=3,
                     mom2_n_samples=10_000, mom2_update_weight=10)  # fmt: skip
    ref = MEMITEditor(cfg, stats_texts=texts, stats_cache_dir=tmp_path / "ref")
    ref.setup(model, tok)
    want = {layer: ref.stats(model, tok, layer).clone() for layer in (0, 1)}
    ed = MEMITEditor(cfg, stats_texts=texts, stats_cache_dir=tmp_path / "run")
    h = ed.apply(model, tok, world_requests(small_world, 1))
    try:
        for layer in (0, 1):
            assert torch.equal(ed.stats(model, tok, layer), want[layer]), layer
    finally:
        h.restore()
