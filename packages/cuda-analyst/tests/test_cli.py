"""CLI: --help without torch, eval-kernel, and the evolve -> freeze -> intervene -> replay ->
attribute pipeline with the mock LLM (C backend)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cuda_analyst.candidates import candidate
from cuda_analyst.cli import main


def test_help_does_not_import_torch():
    code = "import sys; from cuda_analyst.cli import build_parser; build_parser().format_help(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_eval_kernel(tmp_path, capsys, cbackend):
    f = tmp_path / "cand.c"
    f.write_text(candidate("softmax_rows", "wrong"))
    assert main(["eval-kernel", "--task", "softmax_rows", str(f)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "COMPILE" and out["backend"] == "c"
    assert {r["name"] for r in out["reports"]} >= {"ErrorPhase", "Debugger"}


@pytest.mark.extended
def test_eval_kernel_kernelbench(tmp_path, capsys, cbackend):
    """Extended (one more sandboxed torch start, ~8 s under load): ``--kernelbench``."""
    from test_kernelbench import RELU_C, RELU_PROBLEM

    prob, cand = tmp_path / "19_ReLU.py", tmp_path / "relu.c"
    prob.write_text(RELU_PROBLEM)
    cand.write_text(RELU_C)
    assert main(["eval-kernel", "--kernelbench", str(prob), str(cand)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "PASS" and out["timing"]["meaningful"] is False
    assert out["signature"] == "void kernel(const float* x, float* out, int x_d0, int x_d1)"


def test_pipeline(tmp_path, capsys, cbackend, eval_cache):
    run, fz, gen = tmp_path / "run", tmp_path / "fz", tmp_path / "gen"
    assert (
        main(
            [
                "evolve",
                "--task",
                "reduce_sum",
                "--generations",
                "2",
                "--population",
                "2",
                "--children",
                "2",
                "-o",
                str(run),
            ]
        )
        == 0
    )
    assert main(["freeze", str(run / "checkpoints"), "-o", str(fz)]) == 0
    assert main(["intervene", str(fz), "--num-run", "2", "--num-trials", "2", "-o", str(gen)]) == 0
    assert len(list(gen.glob("p7-*.json"))) == 8
    assert main(["replay", str(gen / "p7-d3-a3-p3"), "--frozen", str(fz), "--llm", "mock:weak", "--num-run", "2",
                 "--num-trials", "2", "-o", str(tmp_path / "replay")]) == 0  # fmt: skip
    assert main(["attribute", str(gen), "--metric", "pass", "-o", str(tmp_path / "att.json")]) == 0
    att = json.loads((tmp_path / "att.json").read_text())
    assert set(att["all"]["shapley"]) == {"d", "a", "p"} and "triple" in att["all"]["synergy"]
    capsys.readouterr()
    assert main(["attribute", str(tmp_path / "nothing")]) == 2
    assert "no per-mask result files" in capsys.readouterr().err
