"""Bad input gets clear errors: players, mode bits, masks, frozen folders without usable
samples (with counts), missing coalition masks, mismatched generations or signatures,
tolerance <= 0, GPU-only parts without their device or tool; a codeless reply is FAIL."""

from __future__ import annotations

import json

import pytest
from cuda_analyst.attribution import attribute
from cuda_analyst.errors import AnalystValueError, FrozenDataError, ToolUnavailableError
from cuda_analyst.masks import AnalysisMask, check_players, coalition_masks


def test_players_modes_masks():
    with pytest.raises(ValueError, match="invalid players"):
        check_players(["d", "z"])
    with pytest.raises(ValueError, match="invalid players"):
        attribute({}, players=("d", "d"))
    with pytest.raises(ValueError, match="mode bits"):
        AnalysisMask(plan=6)
    with pytest.raises(ValueError, match="malformed mask"):
        AnalysisMask.parse("p7-d3-a3")
    with pytest.raises(ValueError, match="unknown metric"):
        attribute(
            {str(m): [{"1": {"total": 1, "pass": 1}}] for m in coalition_masks()}, metric="speed"
        )


def test_frozen_dir_without_usable_samples(tmp_path):
    from cuda_analyst.trajectory import group_openevolve_by_gen, load_frozen

    progs = tmp_path / "ck" / "programs"
    progs.mkdir(parents=True)
    (progs / "a.json").write_text(json.dumps({"id": "a", "parent_id": None, "code": "x"}))
    (progs / "b.json").write_text(
        json.dumps({"id": "b", "parent_id": "a", "code": "y"})
    )  # no prompts
    (progs / "c.json").write_text("{not json")
    with (
        pytest.warns(UserWarning, match="malformed"),
        pytest.raises(
            FrozenDataError,
            match=r"3 files, 2 programs, 1 with children, 1 children without prompts",
        ),
    ):
        group_openevolve_by_gen(tmp_path / "ck", tmp_path / "fz")
    (tmp_path / "fz2" / "gen1").mkdir(parents=True)
    (tmp_path / "fz2" / "gen1" / "a_0.json").write_text(json.dumps({"id": "a", "code": "x"}))
    with pytest.raises(FrozenDataError, match="1 files under gen"):
        load_frozen(tmp_path / "fz2")


def test_missing_masks_and_mismatched_generations():
    res = {str(m): [{"1": {"total": 2, "pass": 1}}] for m in coalition_masks()}
    del res["p7-d0-a3-p3"]
    with pytest.raises(FrozenDataError, match=r"missing coalition masks \['p7-d0-a3-p3'\]"):
        attribute(res)
    res = {str(m): [{"1": {"total": 2, "pass": 1}}] for m in coalition_masks()}
    res["p7-d3-a3-p3"] = [{"1": {"total": 2, "pass": 1}, "2": {"total": 2, "pass": 1}}]
    with pytest.raises(FrozenDataError, match="different generations"):
        attribute(res)


def test_signature_and_tolerance():
    from cuda_analyst.tasks import Task, get_task, parse_signature

    t = get_task("matmul")
    with pytest.raises(AnalystValueError, match="differs from task"):
        t.check_signature("void kernel(const float* a, float* c, int n)")
    with pytest.raises(AnalystValueError, match="tolerance must be > 0"):
        Task(
            "x",
            t.signature,
            t.make_inputs,
            t.sizes_of,
            t.reference,
            t.baseline_src,
            tol=(0.0, 1e-2),
        )
    with pytest.raises(AnalystValueError, match="cannot parse argument"):
        parse_signature("void kernel(double* x)")
    with pytest.raises(AnalystValueError, match="unknown task"):
        get_task("fft")


def test_evaluator_tolerance_and_codeless_reply(cbackend):
    from cuda_analyst.evaluator import Evaluator
    from cuda_analyst.tasks import get_task

    with pytest.raises(AnalystValueError, match="tol_fast must be > 0"):
        Evaluator(get_task("relu"), cbackend, tol_fast=0.0)
    ev = Evaluator(get_task("relu"), cbackend)
    r = ev.evaluate(None)
    assert r.status == "FAIL" and r.error["reason"] == "No code block in reply"


def test_gpu_only_parts_name_the_missing_piece(monkeypatch, sandbox):
    import shutil as sh

    from cuda_analyst import backends

    for name in ("cuda", "kernelbench"):
        with pytest.raises(
            ToolUnavailableError, match="CUDA device and is not part of this release"
        ):
            backends.get_backend(name)
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "triton" else real_find_spec(n, *a)
    )
    with pytest.raises(ToolUnavailableError, match=r"cuda-analyst\[triton\]"):
        backends.TritonInterpreterBackend(sandbox=sandbox)
    monkeypatch.setattr(importlib.util, "find_spec", real_find_spec)
    monkeypatch.setattr(backends.shutil, "which", lambda name: None)
    with pytest.raises(ToolUnavailableError, match="nvcc"):
        backends.CudaCompileOnlyBackend(sandbox=sandbox)
    with pytest.raises(ToolUnavailableError, match="gcc"):
        backends.CBackend(sandbox=sandbox)
    monkeypatch.setattr(backends.shutil, "which", sh.which)
    if sh.which("nvcc"):
        be = backends.CudaCompileOnlyBackend(sandbox=sandbox)
        with pytest.raises(ToolUnavailableError, match="CUDA device"):
            be.check(None, None)


def test_codeless_llm_reply_counts_as_fail(tmp_path, cbackend, eval_cache):
    from cuda_analyst.evaluator import Evaluator
    from cuda_analyst.intervene import intervene
    from cuda_analyst.llm import MockLLM
    from cuda_analyst.tasks import get_task
    from cuda_analyst.trajectory import evolve, group_openevolve_by_gen

    ev = Evaluator(get_task("matmul"), cbackend, cache=eval_cache)
    evolve(ev, MockLLM("strong", 0), tmp_path / "run", generations=1, population=1, children=1)
    group_openevolve_by_gen(tmp_path / "run" / "checkpoints", tmp_path / "fz")
    res = intervene(
        tmp_path / "fz",
        ["p7-d3-a3-p3"],
        MockLLM("strong", 0, codeless_rate=1.0),
        ev,
        num_run=1,
        num_trials=2,
    )
    assert res["p7-d3-a3-p3"][0]["1"] == {"total": 1, "fail": 1, "compile": 0, "pass": 0, "fast": 0}


def test_bad_llm_spec():
    from cuda_analyst.llm import make_llm

    with pytest.raises(AnalystValueError, match="bad LLM spec"):
        make_llm("gpt4")


def test_load_task(tmp_path, cbackend):
    from cuda_analyst.evaluator import Evaluator
    from cuda_analyst.tasks import load_task

    f = tmp_path / "scale.py"
    f.write_text(
        "import numpy as np\nfrom cuda_analyst import Task\n\n"
        "def ref(x):\n    return [2 * x]\n\n"
        "TASK = Task('scale', 'void kernel(const float* x, float* out, int n)',\n"
        "            lambda s, n: [np.random.default_rng(s).random(n)], lambda xs: [xs[0].size], ref,\n"
        "            'void kernel(const float* x, float* out, int n) { for (int i = 0; i < n; i++) out[i] = 2 * x[i]; }\\n',\n"
        "            check_size=100, time_size=1000)\n"
    )
    task = load_task(f)
    assert Evaluator(task, cbackend).evaluate(task.baseline_src).status in ("PASS", "FAST")
    (tmp_path / "none.py").write_text("X = 1\n")
    with pytest.raises(AnalystValueError, match="must define TASK"):
        load_task(tmp_path / "none.py")
    with pytest.raises(AnalystValueError, match="does not exist"):
        load_task(tmp_path / "missing.py")
