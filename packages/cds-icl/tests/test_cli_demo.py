"""CLI and demo: --help stays torch-free; subcommands run end to end on the tiny fixture."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cds_icl.cli import main


def test_help_does_not_import_torch():
    code = ("import sys; from cds_icl.cli import build_parser; build_parser(); import cds_icl; "
            "cds_icl.METHOD; print('torch' in sys.modules)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_method_registered():
    from llmcore.registry import get_method

    assert get_method("cds-icl").demo == "cds_icl.demo:run"


def test_pool_order_lmeval_cli(tmp_path, capsys):
    pool = tmp_path / "pool.jsonl"
    assert main(["pool", "--task", "synthetic", "--n", "32", "--out", str(pool)]) == 0
    order = tmp_path / "order.json"
    assert main(["order", "--pool", str(pool), "--embed", "hash", "--seed", "71",
                 "--out", str(order)]) == 0  # fmt: skip
    o = json.loads(order.read_text())
    assert sorted(o["order"]) == list(range(32)) and o["n"] == 32 and o["seed"] == 71
    tasks = tmp_path / "tasks"
    assert main(["lm-eval-tasks", "--pool", str(pool), "--order", str(order), "--k", "8",
                 "--out", str(tasks)]) == 0  # fmt: skip
    y = (tasks / "cds_synthetic.yaml").read_text()
    assert "sampler: first_n" in y and "num_fewshot: 8" in y and "process_results" in y


def test_eval_and_score_cli(tiny, tmp_path, capsys):
    from cds_icl.tiny import build_tiny

    path = str(build_tiny(progress=False).path)
    out = tmp_path / "res.jsonl"
    assert main(["eval", "--model", path, "--task", "synthetic", "--selector", "cds", "--k", "4",
                 "--seeds", "71", "--limit", "3", "--max-new-tokens", "40", "--no-chat",
                 "--out", str(out)]) == 0  # fmt: skip
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["selector"] == "cds" and 0 <= summary["acc"] <= 1
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 4 and "acc" in rows[-1]
    pool = tmp_path / "pool.jsonl"
    main(["pool", "--task", "synthetic", "--n", "8", "--out", str(pool)])
    scores = tmp_path / "s.jsonl"
    assert main(["score-understandability", "--model", path, "--pool", str(pool),
                 "--out", str(scores)]) == 0  # fmt: skip
    assert len(scores.read_text().splitlines()) == 8


@pytest.mark.slow
def test_demo_runs(tiny):
    from cds_icl.demo import run

    out = run(print_table=False)
    assert out["cds_angle"] < out["random_angle"]
    assert {"cds_acc", "random_acc", "high_curvature_acc"} <= set(out)
