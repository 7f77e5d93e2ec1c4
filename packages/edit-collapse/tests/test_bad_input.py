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
