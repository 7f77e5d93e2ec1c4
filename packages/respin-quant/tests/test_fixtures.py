"""The registered fixture and the demo-size model: cache keys and thread handling (cheap: a
2-step model in a temporary cache)."""

from __future__ import annotations

import json

import torch
from respin_quant import tiny
from respin_quant.fixtures import FIXTURES
from respin_quant.tiny import DEMO_SPEC, TinySpec, _cache_dir, build_tiny

SMALL = TinySpec(hidden=32, layers=1, heads=2, intermediate=64, steps=2, batch=4)


def test_fixture_is_registered_with_a_measured_cost():
    (fx,) = FIXTURES
    assert fx.load_builder().__name__ == "build_markov"
    assert fx.cold_seconds > 0


def test_demo_model_has_its_own_cache_key():
    assert DEMO_SPEC.steps < TinySpec().steps
    assert _cache_dir(DEMO_SPEC) != _cache_dir(TinySpec())


def test_build_honours_zoo_threads_outside_the_key(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMCORE_CACHE_DIR", str(tmp_path))
    seen = []
    train = tiny._train

    def spy(spec):
        seen.append(torch.get_num_threads())
        return train(spec)

    monkeypatch.setattr(tiny, "_train", spy)
    prev = torch.get_num_threads()
    monkeypatch.setenv("LLMCORE_ZOO_THREADS", "2")
    path = build_tiny(SMALL)
    assert seen == [2] and torch.get_num_threads() == prev
    assert json.loads((path / "respin_tiny.json").read_text())["threads"] == 2
    monkeypatch.setenv("LLMCORE_ZOO_THREADS", "1")
    assert _cache_dir(SMALL) == path  # the thread count is not in the key
    assert build_tiny(SMALL, force=True, threads=1) == path
    assert seen == [2, 1]
