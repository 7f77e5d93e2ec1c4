"""The ``d3llm`` command line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def test_help_does_not_import_torch():
    code = (
        "import sys\nfrom d3llm.cli import build_parser\nimport d3llm\n"
        "build_parser().format_help()\nd3llm.METHOD\n"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_aup_command(tmp_path, capsys):
    from d3llm.cli import main
    from d3llm.metrics import write_points

    write_points(
        tmp_path / "p.yaml",
        {"gsm8k": {"d3LLM": [[1, 74.02], [9.11, 73.09]], "LLaDA": [[1, 74.98]]}},
    )
    assert main(["aup", "--points", str(tmp_path / "p.yaml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("gsm8k\td3LLM\t637.65")


def test_user_errors_exit_2(tmp_path, capsys):
    from d3llm.cli import main

    assert main(["aup", "--points", str(tmp_path / "missing.yaml")]) == 2
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["generate", "--model", "x", "--prompt", "1", "--method", "bogus"])


@pytest.mark.slow
def test_make_tiny_then_generate_and_eval(tmp_path, capsys):
    """An untrained tiny model end to end through the CLI (decoding runs, files appear)."""
    from d3llm.cli import main
    from d3llm.metrics import read_points

    out = tmp_path / "tiny"
    assert main(["make-tiny", "--out", str(out), "--n-train", "50", "--n-eval", "4",
                 "--hidden", "32", "--layers", "1"]) == 0  # fmt: skip
    capsys.readouterr()
    model = str(out / "model")
    args = ["--gen-length", "16", "--block-size", "4"]
    assert main(["generate", "--model", model, "--prompt", "123456=", *args]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["nfe"] >= 1 and "text" in res
    pts = tmp_path / "points.yaml"
    assert main(["eval", "--model", model, "--data", str(out / "data"), "--thresholds",
                 "0.5,1.0", "--out", str(pts), "--name", "tiny", *args]) == 0  # fmt: skip
    data = read_points(pts)
    assert len(data["parity"]["tiny"]) == 2


def test_make_tiny_task_choices_are_the_known_tasks():
    from d3llm.cli import build_parser
    from d3llm.task import TASKS

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    task_arg = next(a for a in sub.choices["make-tiny"]._actions if a.dest == "task")
    assert sorted(task_arg.choices) == sorted(TASKS) == ["parity", "sort"]


@pytest.mark.slow
def test_sort_task_extract_then_distill_from_data(tmp_path, capsys):
    """make-tiny --task sort writes sorted-digit answers; trajectories extracted from its data
    train a student with ``distill --data`` (targets looked up by idx), and a data folder that
    lacks a trajectory's idx is refused."""
    from d3llm.cli import main

    from llmcore.data import read_jsonl, write_jsonl

    out = tmp_path / "tiny"
    assert main(["make-tiny", "--task", "sort", "--out", str(out), "--n-train", "20",
                 "--n-eval", "4", "--hidden", "32", "--layers", "1"]) == 0  # fmt: skip
    rows = read_jsonl(out / "data" / "train.jsonl")
    digits = rows[0]["question"].rstrip("=").split(",")
    assert rows[0]["gt_answer"] == "".join(sorted(digits))
    traj = tmp_path / "traj"
    assert main(["extract-trajectories", "--teacher", str(out / "model"), "--data",
                 str(out / "data"), "--limit", "4", "--max-attempts", "1",
                 "--out", str(traj)]) == 0  # fmt: skip
    capsys.readouterr()
    student = tmp_path / "student"
    args = ["distill", "--student-init", str(out / "model"), "--traj", str(traj), "--max-steps",
            "2", "--batch-size", "2", "--block-sizes", "4,8"]  # fmt: skip
    assert main([*args, "--data", str(out / "data"), "--out", str(student)]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["steps"] == 2
    assert (student / "model.safetensors").is_file()
    bad = tmp_path / "bad"
    bad.mkdir()
    write_jsonl(bad / "train.jsonl", [{"idx": 99, "question": "1,2=", "gt_answer": "12"}])
    assert main([*args, "--data", str(bad), "--out", str(tmp_path / "s2")]) == 2
    assert "idx=0" in capsys.readouterr().err
