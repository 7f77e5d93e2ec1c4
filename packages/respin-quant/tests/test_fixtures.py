"""The registered fixture and the demo-size model: zoo entries, cache keys and thread handling
(cheap: a 2-step model in a temporary cache)."""

from __future__ import annotations

import torch
from respin_quant import tiny
from respin_quant.fixtures import FIXTURES
from respin_quant.tiny import DEMO_SPEC, ENTRY, TinySpec, build_tiny_entry, tiny_material

from llmcore import zoo

SMALL = TinySpec(hidden=32, layers=1, heads=2, intermediate=64, steps=2, batch=4)


def test_fixture_is_registered_with_a_measured_cost():
    (fx,) = FIXTURES
    assert fx.load_builder().__name__ == "build_markov"
    assert fx.cold_seconds > 0 and fx.entries == (ENTRY,)


def test_demo_model_has_its_own_cache_key():
    assert DEMO_SPEC.steps < TinySpec().steps
    assert tiny_material(DEMO_SPEC) != tiny_material(TinySpec())
    assert tiny_material(TinySpec())["code"] == zoo.code_digest(tiny)


def test_build_is_a_zoo_entry_and_honours_zoo_threads_outside_the_key(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("LLMCORE_CACHE_DIR", str(tmp_path))
    seen = []
    train = tiny._train

    def spy(spec, progress=True):
        seen.append(torch.get_num_threads())
        return train(spec, progress=progress)

    monkeypatch.setattr(tiny, "_train", spy)
    prev = torch.get_num_threads()
    monkeypatch.setenv("LLMCORE_ZOO_THREADS", "2")
    entry = build_tiny_entry(SMALL)
    assert seen == [2] and torch.get_num_threads() == prev
    assert not entry.from_cache and entry.metrics["threads"] == 2
    assert entry.metrics["fp_ppl"] > 1 and (entry.path / "config.json").exists()
    assert "building respin-tiny-markov" in capsys.readouterr().err  # progress is visible
    assert zoo.lookup(ENTRY, tiny_material(SMALL)).path == entry.path  # listed by the zoo
    assert entry.path.parent == tmp_path / "zoo"
    monkeypatch.setenv("LLMCORE_ZOO_THREADS", "1")
    again = build_tiny_entry(SMALL)
    assert again.from_cache and again.path == entry.path  # the thread count is not in the key
    assert seen == [2]
    assert build_tiny_entry(SMALL, force=True, threads=1, progress=False).path == entry.path
    assert seen == [2, 1]
