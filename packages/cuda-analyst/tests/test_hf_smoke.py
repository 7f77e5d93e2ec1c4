"""Pipeline smoke run through llmcore's HFBackend on the built-in ``tiny-llama`` (no assertion
on rates: the tiny model writes no kernels; its replies are evaluated and counted)."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_hf_backend_pipeline(tmp_path, cbackend, eval_cache):
    from cuda_analyst.evaluator import Evaluator
    from cuda_analyst.intervene import intervene
    from cuda_analyst.llm import MockLLM
    from cuda_analyst.tasks import get_task
    from cuda_analyst.trajectory import evolve, group_openevolve_by_gen

    from llmcore import zoo
    from llmcore.generation import get_backend

    entry = zoo.build("tiny-llama", progress=False)
    llm = get_backend("hf", str(entry.path), device="cpu", progress=False)
    ev = Evaluator(get_task("matmul"), cbackend, cache=eval_cache)
    evolve(ev, MockLLM("strong", 0), tmp_path / "run", generations=1, population=1, children=1)
    group_openevolve_by_gen(tmp_path / "run" / "checkpoints", tmp_path / "fz")
    res = intervene(
        tmp_path / "fz",
        ["p3-d3-a3-p3"],
        llm,
        ev,
        num_run=1,
        num_trials=2,
        max_new_tokens=8,
        out_dir=tmp_path / "gen",
    )
    counts = res["p3-d3-a3-p3"][0]["1"]
    assert counts["total"] == 1 and sum(counts[k] for k in ("fail", "compile", "pass", "fast")) == 1
