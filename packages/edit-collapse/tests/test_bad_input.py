"""Bad input gets clear errors."""

from __future__ import annotations

import pytest
import torch
from edit_collapse.config import (
    EditConfig,
    auto_module_templates,
    config_from_mapping,
    load_hparams,
)
from edit_collapse.editors import AlphaEditEditor, MEMITEditor, ROMEEditor
from edit_collapse.errors import (
    EditDivergedError,
    EditInputError,
    JudgeUnavailableError,
    StaleStatsError,
    TargetNotReachedWarning,
    UnsupportedModelError,
)
from edit_collapse.requests import EditRequest, world_requests

CTX = [[3, 1]]


def test_subject_not_in_prompt(random_pair):
    model, tok = random_pair
    req = EditRequest(prompt="the home of bako is", subject="zzz", target_new="rome", case_id=7)
    with pytest.raises(EditInputError, match="subject 'zzz' does not occur"):
        ROMEEditor(EditConfig("ROME", layers=[1], context_template_length_params=CTX)).apply(
            model, tok, [req]
        )


def test_empty_target():
    with pytest.raises(EditInputError, match="empty target_new"):
        EditRequest(prompt="x lives in", subject="x", target_new=" ")


def test_layer_out_of_range_and_template_mismatch(random_pair):
    model, _ = random_pair
    with pytest.raises(EditInputError, match=r"out of range.*3 layers"):
        auto_module_templates(model, EditConfig("ROME", layers=[7]))
    with pytest.raises(EditInputError, match="not a module"):
        auto_module_templates(
            model, EditConfig("ROME", layers=[1], rewrite_module_tmp="transformer.h.{}.mlp.c_proj")
        )


def test_stale_statistics(random_pair, small_world, tmp_path):
    from edit_collapse.stats import layer_stats, load_stats, stats_key, stats_path

    model, tok = random_pair
    texts = [f.sentence(0) for f in small_world.facts]
    layer_stats(
        model,
        tok,
        "model.layers.0.mlp.down_proj",
        texts,
        10,
        cache_dir=tmp_path,
        model_digest="a" * 64,
    )
    key = stats_key("a" * 64, "model.layers.0.mlp.down_proj", "float32", 10, texts[:10])
    path = stats_path(key, tmp_path)
    assert path.is_file()
    with pytest.raises(StaleStatsError, match="model_sha256"):
        load_stats(path, {**key, "model_sha256": "b" * 64})


def test_statistics_key_carries_the_code(random_pair, small_world, tmp_path, monkeypatch):
    """The statistics' key and file name carry a digest of the code that computes C_0: a change
    to that code (this module, or a core helper it calls) finds no older file, and a file
    recorded under another code is refused."""
    import importlib.util
    import shutil
    import sys

    from edit_collapse import core, stats

    model, tok = random_pair
    texts = [f.sentence(0) for f in small_world.facts]
    mod = "model.layers.0.mlp.down_proj"
    key = stats.stats_key("a" * 64, mod, "float32", 10, texts[:10])
    path = stats.stats_path(key, tmp_path)
    assert key["code"] == stats.stats_code_digest()
    assert path.name.startswith(key["code"] + "-")
    stats.layer_stats(model, tok, mod, texts, 10, cache_dir=tmp_path, model_digest="a" * 64)
    assert path.is_file()

    # an edited copy of the statistics module computes another key
    src = tmp_path / "copy" / "stats.py"
    src.parent.mkdir()
    shutil.copy(stats.__file__, src)
    src.write_text(src.read_text() + "\n# a change to the statistics code\n")
    spec = importlib.util.spec_from_file_location("edit_collapse._stats_copy", src)
    copy = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, copy)
    spec.loader.exec_module(copy)
    other = copy.stats_key("a" * 64, mod, "float32", 10, texts[:10])
    assert other["code"] != key["code"]
    assert copy.stats_path(other, tmp_path) != path
    with pytest.raises(StaleStatsError, match="code"):
        stats.load_stats(path, other)

    # so does a change to a core helper it calls (the padding)
    orig = core.pad_right

    def pad_right(rows, pad_id, device):  # another implementation: another digest
        return orig(rows, pad_id, device)

    monkeypatch.setattr(core, "pad_right", pad_right)
    changed = stats.stats_key("a" * 64, mod, "float32", 10, texts[:10])
    assert changed["code"] != key["code"]
    assert not stats.stats_path(changed, tmp_path).exists()
    stats.layer_stats(model, tok, mod, texts, 10, cache_dir=tmp_path, model_digest="a" * 64)
    assert stats.stats_path(changed, tmp_path).is_file()  # recomputed, not the older file


@pytest.mark.parametrize("cls", [ROMEEditor, MEMITEditor])
def test_v_star_short_of_target_warns(cls, random_pair, small_world, tmp_path):
    """One v* step cannot reach the target on a random model: a warning names the request, the
    final target NLL and the threshold, and the handle and the session rows record the miss."""
    from edit_collapse.core import V_STAR_NLL_TOL, V_STAR_WARN_PROB
    from edit_collapse.session import run_edit_session

    model, tok = random_pair
    cfg = EditConfig(cls.alg, layers=[1], context_template_length_params=CTX, v_num_grad_steps=1)
    ed = cls(cfg, stats_texts=[f.sentence(0) for f in small_world.facts], stats_cache_dir=tmp_path)
    reqs = world_requests(small_world, 2)
    with pytest.warns(TargetNotReachedWarning) as rec:
        res = run_edit_session(ed, model, tok, reqs, eval_at=(1, 2))
    res.handle.restore()
    msgs = [str(w.message) for w in rec]
    assert len(msgs) == 2
    r0 = reqs[0]
    assert f"request 0 ({r0.prompt!r} -> {r0.target_new!r})" in msgs[0]
    assert "in 1 steps: target NLL" in msgs[0] and f"< {V_STAR_WARN_PROB:g}" in msgs[0]
    assert [v["case_id"] for v in res.handle.v_star] == [0, 1]
    for v in res.handle.v_star:
        assert not v["reached"] and v["steps"] == 1 and v["nll"] > V_STAR_NLL_TOL
        assert v["target_prob"] < V_STAR_WARN_PROB
        assert f"target NLL {v['nll']:.3g}" in msgs[v["case_id"]]
    assert [r["v_star_missed"] for r in res.rows] == [1, 2]


def test_v_star_near_miss_is_recorded_without_warning(random_pair, small_world, tmp_path,
                                                      monkeypatch):  # fmt: skip
    """A search that ends above the stopping tolerance but with P(target) over the warning
    level (here: a level of 0) only counts in the records."""
    import warnings

    from edit_collapse import core
    from edit_collapse.session import run_edit_session

    monkeypatch.setattr(core, "V_STAR_WARN_PROB", 0.0)
    model, tok = random_pair
    cfg = EditConfig("ROME", layers=[1], context_template_length_params=CTX, v_num_grad_steps=1)
    ed = ROMEEditor(cfg, stats_texts=[f.sentence(0) for f in small_world.facts],
                    stats_cache_dir=tmp_path)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error", TargetNotReachedWarning)
        res = run_edit_session(ed, model, tok, world_requests(small_world, 2), eval_at=(2,))
    res.handle.restore()
    assert [v["reached"] for v in res.handle.v_star] == [False, False]
    assert res.rows[-1]["v_star_missed"] == 2


def test_non_finite_update(random_pair, small_world, tmp_path):
    model, tok = random_pair
    cfg = EditConfig("MEMIT", layers=[1], context_template_length_params=CTX, v_num_grad_steps=1,
                     mom2_update_weight=float("nan"))  # fmt: skip
    ed = MEMITEditor(
        cfg, stats_texts=[f.sentence(0) for f in small_world.facts], stats_cache_dir=tmp_path
    )
    before = model.get_parameter("model.layers.1.mlp.down_proj.weight").clone()
    with pytest.raises(EditDivergedError, match="mom2_update_weight"):
        ed.apply(model, tok, world_requests(small_world, 1))
    assert torch.equal(model.get_parameter("model.layers.1.mlp.down_proj.weight"), before)


def test_frozen_and_quantised_targets(random_pair, small_world):
    model, tok = random_pair
    w = model.get_parameter("model.layers.1.mlp.down_proj.weight")
    ed = ROMEEditor(
        EditConfig("ROME", layers=[1], context_template_length_params=CTX, v_num_grad_steps=1)
    )
    w.requires_grad_(False)
    try:
        with pytest.raises(UnsupportedModelError, match="frozen"):
            ed.apply(model, tok, world_requests(small_world, 1))
    finally:
        w.requires_grad_(True)
    lin = model.model.layers[1].mlp.down_proj
    orig = lin.weight
    lin.weight = torch.nn.Parameter(torch.zeros_like(orig, dtype=torch.int8), requires_grad=False)
    try:
        with pytest.raises(UnsupportedModelError, match="quantised"):
            ed.apply(model, tok, world_requests(small_world, 1))
    finally:
        lin.weight = orig


def test_encoder_decoder_refused():
    from transformers import T5Config, T5ForConditionalGeneration

    t5 = T5ForConditionalGeneration(
        T5Config(vocab_size=32, d_model=8, d_kv=4, d_ff=8, num_layers=1, num_heads=2)
    )
    with pytest.raises(UnsupportedModelError, match="encoder-decoder"):
        auto_module_templates(t5)


def test_batched_rome_refused(random_pair, small_world):
    model, tok = random_pair
    ed = ROMEEditor(EditConfig("ROME", layers=[1], context_template_length_params=CTX))
    with pytest.raises(EditInputError, match="sequential=True"):
        ed.apply(model, tok, world_requests(small_world, 2), sequential=False)


def test_judge_unreachable():
    from edit_collapse import metrics as M

    from llmcore.generation import get_backend

    with pytest.raises(JudgeUnavailableError, match="judge backend"):
        M.match("a", "a", "judge", None)
    pytest.importorskip("openai")
    judge = get_backend(
        "openai", "judge", base_url="http://127.0.0.1:9/v1", max_retries=0, timeout=2
    )
    with pytest.raises(JudgeUnavailableError, match="unreachable"):
        M.match("a", "a", "judge", judge)


def test_length_mismatch_in_easyedit_call(random_pair):
    from edit_collapse.compat import EasyEditCompat

    model, tok = random_pair
    ed = ROMEEditor(EditConfig("ROME", layers=[1]))
    with pytest.raises(EditInputError, match="differ in length"):
        EasyEditCompat(ed, model, tok).edit(
            prompts=["a b", "c d"], target_new=["x"], subject=["a", "c"]
        )


def test_hparams_yaml_keeps_unknown_keys(tmp_path):
    p = tmp_path / "rome.yaml"
    p.write_text("alg_name: ROME\nlayers: [5]\nv_lr: 0.5\nmodel_parallel: false\nfp16: true\n")
    with pytest.warns(UserWarning, match="fp16"):
        cfg = load_hparams(p)
    assert cfg.layers == [5] and cfg.extra == {"model_parallel": False, "fp16": True}
    with pytest.raises(EditInputError, match="alg_name"):
        config_from_mapping({"alg_name": "MEND"})
    with pytest.raises(EditInputError, match="does not exist"):
        load_hparams(tmp_path / "missing.yaml")


def test_alphaedit_without_null_space(random_pair, small_world, tmp_path):
    """A threshold below every eigenvalue of C_0 gives the projector 0: every AlphaEdit update
    would be 0, so it is refused instead of editing nothing."""
    model, tok = random_pair
    texts = [f.sentence(t) for f in small_world.facts for t in range(3)]
    cfg = EditConfig("AlphaEdit", layers=[1], context_template_length_params=CTX,
                     v_num_grad_steps=2, nullspace_threshold=0.0)  # fmt: skip
    ed = AlphaEditEditor(cfg, stats_texts=texts, stats_cache_dir=tmp_path)
    with pytest.raises(
        EditInputError, match="nullspace_threshold=0 leaves no null space at layer 1"
    ):
        ed.apply(model, tok, world_requests(small_world, 1))


def test_encoder_name_not_a_sentence_encoder_folder(tmp_path):
    """A local ``encoder_name`` that does not exist, is a file, or is a folder without
    ``modules.json`` is refused with the path named when the retrieval/IKE editor is built
    (nothing is loaded), and by ``edit``, ``capability`` and ``sweep`` before the model loads
    (the model path here does not exist); ``--encoder-name`` with ``--encoder bm25`` is refused.
    Hub ids are not checked here (they are the loader's)."""
    import yaml
    from edit_collapse.cli import main
    from edit_collapse.retrieval import IKEEditor, RetrievalEditor

    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "config.json").write_text("{}")
    (tmp_path / "f.txt").write_text("x")
    cases = [(tmp_path / "missing", "no such folder"), (tmp_path / "f.txt", "is a file"),
             (tmp_path / "plain", "not a sentence-transformers model folder")]  # fmt: skip
    for path, msg in cases:
        for make in (RetrievalEditor, IKEEditor):
            with pytest.raises(EditInputError, match=msg):
                make(encoder="embed", encoder_name=str(path))
        with pytest.raises(EditInputError, match=msg):
            RetrievalEditor(encoder="auto", encoder_name=str(path))
    RetrievalEditor(encoder="bm25", encoder_name=str(tmp_path / "missing"))  # not used by BM25
    RetrievalEditor(encoder="embed", encoder_name="some-org/some-encoder")  # a hub id: loader's
    data = tmp_path / "req.jsonl"
    data.write_text('{"prompt": "the capital of x is", "subject": "x", "target_new": "y"}\n')
    base = ["--model", str(tmp_path / "no-model"), "--encoder-name", str(tmp_path / "plain")]
    edit = ["edit", "--method", "retrieval", "--data", str(data), "--fmt", "jsonl", "-o",
            str(tmp_path / "o")]  # fmt: skip
    assert main([*edit, *base]) == 2
    assert main(["capability", "--edited", str(tmp_path), *base]) == 2
    assert main([*edit, *base, "--encoder", "bm25"]) == 2
    cfg = {"model": str(tmp_path / "no-model"), "methods": ["retrieval"], "n_edits": [1],
           "data": str(data), "fmt": "jsonl", "encoder_name": str(tmp_path / "missing")}  # fmt: skip
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["sweep", "--config", str(tmp_path / "s.yaml")]) == 2
