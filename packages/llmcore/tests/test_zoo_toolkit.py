"""zoo.cached / code_digest / artifact_dir, word tokenizers, build_model overrides,
completion-only losses and accuracy gates."""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from llmcore import zoo
from llmcore.errors import ConfigError, QualityGateError
from llmcore.zoo.train import build_model, completion_loss, greedy_completions


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMCORE_CACHE_DIR", str(tmp_path))
    return tmp_path


def _write(tmp, text: str) -> dict:
    (tmp / "out.txt").write_text(text)
    return {"chars": len(text)}


def test_cached_builds_once_and_lists(cache) -> None:
    calls = []

    def make(tmp):
        calls.append(tmp)
        return _write(tmp, "hello")

    a = zoo.cached("derived", {"x": 1}, make, progress=False, description="a test artefact")
    b = zoo.cached("derived", {"x": 1}, make, progress=False)
    assert len(calls) == 1 and not a.from_cache and b.from_cache
    assert a.key == b.key and a.path == b.path and b.metrics == {"chars": 5}
    assert (b.path / "out.txt").read_text() == "hello"
    meta = json.loads((a.path / "zoo.json").read_text())
    assert meta["recipe"] == {"x": 1} and meta["description"] == "a test artefact"
    assert zoo.lookup("derived", {"x": 1}).path == a.path
    assert zoo.lookup("derived", {"x": 2}) is None
    c = zoo.cached("derived", {"x": 2}, make, progress=False)
    assert c.key != a.key and len(calls) == 2
    assert [e["name"] for e in zoo.list_entries()] == ["derived", "derived"]
    forced = zoo.cached("derived", {"x": 1}, make, progress=False, force=True)
    assert not forced.from_cache and len(calls) == 3
    assert zoo.clear("derived") == 2 and zoo.list_entries() == []


def test_clear_entries_unused_for_days(cache, capsys) -> None:
    """Each cache hit records its use; clear(unused_days=N) drops only the entries no run has
    loaded or built for N days (e.g. those a code change re-keyed)."""
    import os
    import time

    from llmcore.cli import main
    from llmcore.zoo.cache import select_entries

    a, b, c = (zoo.cached("derived", {"x": i}, lambda t: _write(t, "hi"), progress=False)
               for i in range(3))  # fmt: skip
    used = a.path.with_name(a.path.name + ".used")
    assert not used.exists()
    assert zoo.lookup("derived", {"x": 0}).from_cache and used.exists()
    assert zoo.cached("derived", {"x": 1}, lambda t: _write(t, "no"), progress=False).from_cache
    ten_days = time.time() - 10 * 86400
    os.utime(used, (ten_days, ten_days))  # a: last loaded 10 days ago
    os.utime(c.path / "zoo.json", (ten_days, ten_days))  # c: built then, never loaded since
    rows = {Path(e["path"]): e for e in zoo.list_entries()}
    assert rows[a.path]["last_used"] == pytest.approx(ten_days, abs=2)
    assert rows[b.path]["last_used"] > ten_days + 9 * 86400
    assert select_entries(unused_days=5) == sorted([a.path, c.path])
    assert select_entries(unused_days=11) == []
    assert select_entries("other", unused_days=5) == []
    assert main(["zoo", "list"]) == 0 and "last_used" in capsys.readouterr().out
    assert main(["zoo", "clear", "--unused-days", "5", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would remove 2 cache entries" in out and str(c.path) in out
    assert len(zoo.list_entries()) == 3
    assert main(["zoo", "clear", "--unused-days", "-1"]) == 2
    assert "unused_days must be >= 0" in capsys.readouterr().err
    assert main(["zoo", "clear", "--unused-days", "5"]) == 0 and not used.exists()
    assert [Path(e["path"]) for e in zoo.list_entries()] == [b.path]
    building = b.path.parent / ".derived-inprogress"  # another process's build, not yet renamed
    building.mkdir()
    assert zoo.clear() == 1 and building.exists() and zoo.list_entries() == []


def test_cached_failure_caches_nothing(cache) -> None:
    def boom(tmp):
        (tmp / "partial.bin").write_bytes(b"x")
        raise RuntimeError("training diverged")

    with pytest.raises(RuntimeError, match="diverged"):
        zoo.cached("broken", {"v": 1}, boom, progress=False)
    assert zoo.lookup("broken", {"v": 1}) is None
    assert not [p for p in (cache / "zoo").iterdir() if p.is_dir()]


def test_cached_rejects_bad_names_and_material(cache) -> None:
    with pytest.raises(ConfigError, match="JSON-serialisable"):
        zoo.cached("x", {"f": object()}, lambda t: None, progress=False)
    with pytest.raises(ConfigError, match="plain folder name"):
        zoo.cached("../escape", {}, lambda t: None, progress=False)


def test_cached_concurrent_callers_build_once(cache) -> None:
    calls = []
    gate = threading.Event()

    def make(tmp):
        calls.append(1)
        gate.wait(5)
        return _write(tmp, "x")

    out = []
    threads = [
        threading.Thread(target=lambda: out.append(zoo.cached("race", {}, make, progress=False)))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(10)
    assert len(calls) == 1 and sum(not e.from_cache for e in out) == 1 and len(out) == 3


def test_cached_progress_lines(cache, capsys) -> None:
    zoo.cached("loud", {}, lambda t: None)
    err = capsys.readouterr().err
    assert "building loud" in err and "built loud" in err


def test_code_digest_tracks_source(tmp_path, monkeypatch) -> None:
    mod = tmp_path / "digest_probe_mod.py"
    mod.write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    d1 = zoo.code_digest("digest_probe_mod")
    assert d1 == zoo.code_digest(sys.modules["digest_probe_mod"]) and len(d1) == 16
    mod.write_text("X = 2\n")
    assert zoo.code_digest("digest_probe_mod") != d1
    pkg_digest = zoo.code_digest("llmcore.zoo")  # a package: all its files
    assert pkg_digest != zoo.code_digest("llmcore.zoo.store")
    with pytest.raises(ConfigError):
        zoo.code_digest()


def test_artifact_dir_honours_cache_env(cache) -> None:
    d = zoo.artifact_dir("my-pkg")
    assert d == cache / "artifacts" / "my-pkg" and d.is_dir()
    with pytest.raises(ConfigError):
        zoo.artifact_dir("../x")


def test_word_tokenizer_one_token_per_symbol(tmp_path) -> None:
    from llmcore.models import load_tokenizer

    bpe = zoo.train_bpe_tokenizer(["12 + 3 = 15"] * 20, 300)
    tok = zoo.word_tokenizer(["12", "+", "3", "=", "15", "q0"])
    ids = tok("12 + 3 = 15 q0", add_special_tokens=False)["input_ids"]
    assert len(ids) == 6 and tok.decode(ids) == "12 + 3 = 15 q0"
    assert tok("7", add_special_tokens=False)["input_ids"] == [tok.unk_token_id]
    for name in ("pad_token_id", "bos_token_id", "eos_token_id", "unk_token_id", "mask_token_id"):
        assert getattr(tok, name) == getattr(bpe, name)
    msgs = [{"role": "user", "content": "12 + 3"}]
    assert tok.apply_chat_template(msgs, tokenize=False) == bpe.apply_chat_template(
        msgs, tokenize=False
    )
    tok.save_pretrained(tmp_path)
    again = load_tokenizer(tmp_path)
    assert again("12 + 3", add_special_tokens=False)["input_ids"] == ids[:3]
    with pytest.raises(ConfigError, match="space-free"):
        zoo.word_tokenizer(["a b"])


def test_bpe_vocab_264_is_character_level() -> None:
    tok = zoo.train_bpe_tokenizer(["abcabc abab"] * 50, 264)
    assert len(tok("abcab", add_special_tokens=False)["input_ids"]) == 5


def _micro(name: str, **tok) -> zoo.Recipe:
    corpus = zoo.Corpus("micro-w", tuple(f"a{i % 7} = b{i % 5}" for i in range(200)))
    return zoo.Recipe(
        name,
        corpus,
        model=zoo.ModelSpec(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64),
        train=zoo.TrainSpec(steps=3, batch_size=4, warmup_steps=1),
        tokenizer=zoo.TokenizerSpec(**tok),
        max_eval_loss=100.0,
    )


def test_word_recipe_and_attn_implementation_reach_load(cache) -> None:
    r = _micro("micro-word", kind="word")
    assert "kind" in r.key_material()["tokenizer"]
    assert "kind" not in _micro("micro-bpe", vocab_size=300).key_material()["tokenizer"]
    assert "attn_implementation" not in r.key_material()["model"]
    r = replace(r, model=replace(r.model, attn_implementation="eager"))
    entry = zoo.build(r, progress=False)
    assert entry.load_kwargs == {"attn_implementation": "eager"}
    model, tok = entry.load()
    assert model.config._attn_implementation == "eager"
    assert len(tok) == 8 + 13  # 8 special/chat tokens + a0..a6, b0..b4 and '='
    assert tok.decode(tok("a3 = b4", add_special_tokens=False)["input_ids"]) == "a3 = b4"
    with pytest.raises(ConfigError, match="kind"):
        zoo.TokenizerSpec(kind="char")  # type: ignore[arg-type]


def test_build_model_vocab_size_and_overrides() -> None:
    spec = zoo.ModelSpec(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
    m = build_model(spec, 50, seed=0, rms_norm_eps=1e-3)
    assert m.config.vocab_size == 50 and m.config.rms_norm_eps == 1e-3
    assert m.get_input_embeddings().weight.shape == (50, 32)
    with pytest.raises(ConfigError):
        build_model(spec, 0)


def test_model_fn_builds_patched_architecture(cache) -> None:
    seen = []

    def model_fn(spec, tok, *, seed):
        seen.append(seed)
        return build_model(spec, tok, seed=seed, rms_norm_eps=1e-2)

    r = _micro("micro-patched", vocab_size=300)
    with pytest.raises(ConfigError, match="key_extra"):
        zoo.build(r, model_fn=model_fn, progress=False)
    e = zoo.build(r, model_fn=model_fn, key_extra={"model": "eps=1e-2"}, progress=False)
    assert seen == [0] and e.load()[0].config.rms_norm_eps == 1e-2


def _tiny_lm(vocab: int = 20):
    spec = zoo.ModelSpec(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
    return build_model(spec, vocab, seed=0)


def test_completion_loss_scores_only_after_marker() -> None:
    model = _tiny_lm()
    ids = torch.tensor([[1, 5, 6, 9, 7, 8, 2], [1, 5, 9, 7, 2, 0, 0]])
    att = (ids != 0).long()
    att[0, -1] = 1
    loss = completion_loss(9)(model, ids, att, None)
    logits = model(input_ids=ids, attention_mask=att).logits
    logp = torch.log_softmax(logits.float(), -1)
    terms = []
    for b, start in ((0, 4), (1, 3)):  # first position after the marker
        for t in range(start, int(att[b].sum())):
            terms.append(-logp[b, t - 1, ids[b, t]])
    assert torch.allclose(loss, torch.stack(terms).mean(), atol=1e-5)
    # no marker anywhere: nothing to score (HF returns nan for an all-ignored batch)
    none = completion_loss(19)(model, ids, att, None)
    assert not torch.isfinite(none) or none == 0


def test_completion_loss_diffusion_never_masks_prompt() -> None:
    model = _tiny_lm()
    ids = torch.tensor([[1, 5, 6, 9, 7, 8, 2]] * 4)
    att = torch.ones_like(ids)
    fn = completion_loss(9, objective="masked_diffusion", mask_token_id=4)
    g = torch.Generator().manual_seed(0)
    loss = fn(model, ids, att, g)
    assert torch.isfinite(loss) and loss > 0
    nothing = completion_loss(19, objective="masked_diffusion", mask_token_id=4)
    assert nothing(model, ids, att, torch.Generator().manual_seed(0)) == 0
    with pytest.raises(ConfigError, match="mask_token_id"):
        completion_loss(9, objective="masked_diffusion")


def test_accuracy_gate_window_fails_loudly() -> None:
    tok = zoo.word_tokenizer(["1", "2", "=", "3"])
    spec = zoo.ModelSpec(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
    model = build_model(spec, tok, seed=0)
    prompts, answers = ["1 = 2", "2 = 1"], ["3", "3"]
    preds = greedy_completions(model, tok, prompts, max_new_tokens=2)
    assert len(preds) == 2 and all(isinstance(p, str) for p in preds)
    acc = sum(p == a for p, a in zip(preds, answers, strict=True)) / 2
    measured = zoo.accuracy_gate(prompts, answers, max_new_tokens=2)(model, tok)
    assert measured == {"gate_accuracy": acc}
    with pytest.raises(QualityGateError, match=r"gate_accuracy=.* outside the gate window"):
        zoo.accuracy_gate(prompts, answers, max_new_tokens=2, match=lambda p, a: True, hi=0.9)(
            model, tok
        )
    with pytest.raises(QualityGateError, match="outside"):
        zoo.accuracy_gate(prompts, answers, max_new_tokens=2, match=lambda p, a: False, lo=0.1)(
            model, tok
        )
    with pytest.raises(ConfigError):
        zoo.accuracy_gate(["a"], [], lo=0.0)
