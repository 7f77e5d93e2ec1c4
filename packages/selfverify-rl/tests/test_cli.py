"""CLI: --help stays torch-free; make-data and export-verl write real files; errors exit 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from selfverify_rl.cli import main


def test_help_does_not_import_torch():
    code = (
        "import sys\nfrom selfverify_rl.cli import build_parser\n"
        "try:\n    build_parser().parse_args(['--help'])\nexcept SystemExit:\n    pass\n"
        "import selfverify_rl\nselfverify_rl.METHOD\n"
        "assert 'torch' not in sys.modules and 'trl' not in sys.modules, 'heavy import'\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_make_data_and_export_verl(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    d = tmp_path / "data"
    assert main(["make-data", "--n-train", "30", "--n-test", "10", "--out", str(d)]) == 0
    train = [json.loads(x) for x in (d / "train.jsonl").read_text().splitlines()]
    test = [json.loads(x) for x in (d / "test.jsonl").read_text().splitlines()]
    assert len(train) == 30 and len(test) == 10
    assert not {r["question"] for r in train} & {r["question"] for r in test}
    a, b = (int(x) for x in train[0]["question"].split("+"))
    assert train[0]["answer"] == str(a + b)
    out = tmp_path / "v.parquet"
    assert main(["export-verl", "--data", str(d), "--out", str(out)]) == 0
    rows = pq.read_table(out).to_pylist()
    assert len(rows) == 30 and rows[0]["data_source"] == "selfverify/arithmetic"
    assert rows[0]["reward_model"]["ground_truth"] == train[0]["answer"]
    assert "\\boxed{}" in rows[0]["prompt"][0]["content"]


def test_bad_data_exits_2(tmp_path, capsys):
    d = tmp_path / "bad"
    d.mkdir()
    (d / "train.jsonl").write_text('{"problem_id": "1", "question": "1+1"}\n')
    assert main(["export-verl", "--data", str(d), "--out", str(tmp_path / "x.parquet")]) == 2
    assert "lacks ['answer']" in capsys.readouterr().err
    assert main(["export-verl", "--data", str(tmp_path / "nope"), "--out", "x"]) == 2


@pytest.mark.slow
def test_train_and_eval_commands(warm_entry, tmp_path):
    """make-data -> train (1 verify step from the warm-up checkpoint) -> eval, all real."""
    from llmcore.rl import reset_accelerate_state

    d, run = tmp_path / "data", tmp_path / "run"
    assert main(["make-data", "--n-train", "16", "--n-test", "16", "--out", str(d)]) == 0
    reset_accelerate_state()
    rc = main(["train", "--mode", "verify", "--model", str(warm_entry.path), "--data", str(d),
               "--steps", "1", "--num-generations", "4", "--prompts-per-step", "2",
               "--max-completion-length", "48", "--cpu", "--out", str(run)])  # fmt: skip
    assert rc == 0 and (run / "model.safetensors").exists()
    hist = json.loads((run / "log_history.json").read_text())
    assert len(hist) == 1 and "verify/buffer_size" in hist[0]
    out = tmp_path / "m.json"
    assert main(["eval", "--model", str(run), "--data", str(d), "--limit", "16",
                 "--verify-set", "self", "--out", str(out)]) == 0  # fmt: skip
    m = json.loads(out.read_text())
    assert 0.0 <= m["gen_acc"] <= 1.0 and m["gen_n"] == 16.0


def test_lmeval_tasks_command(tmp_path, capsys):
    """lm-eval-tasks writes both YAMLs over test.jsonl + candidates.jsonl; without candidates
    it exits 2 naming the command that writes them."""
    d = tmp_path / "data"
    assert main(["make-data", "--n-train", "4", "--n-test", "4", "--out", str(d)]) == 0
    assert main(["lm-eval-tasks", "--data", str(d), "--out", str(tmp_path / "t")]) == 2
    assert "--verify-set fixed" in capsys.readouterr().err
    (d / "candidates.jsonl").write_text(
        '{"question": "12+30", "candidate": "42", "label": "Yes"}\n'
        '{"question": "12+30", "candidate": "52", "label": "No"}\n'
    )
    assert main(["lm-eval-tasks", "--data", str(d), "--out", str(tmp_path / "t")]) == 0
    gen = (tmp_path / "t" / "selfverify_gen.yaml").read_text()
    ver = (tmp_path / "t" / "selfverify_verify.yaml").read_text()
    assert "process_results: !function selfverify_utils.process_gen" in gen
    assert "process_results: !function selfverify_utils.process_verify" in ver
    rows = [
        json.loads(x) for x in (tmp_path / "t" / "selfverify_verify.jsonl").read_text().splitlines()
    ]
    assert [r["label"] for r in rows] == ["Yes", "No"] and "answer 52." in rows[1]["prompt"]


@pytest.mark.slow
def test_warmup_command_sfttrainer_path(warm_entry, tmp_path):
    """``warmup --model <checkpoint>`` takes the trl SFTTrainer path (2 steps) and saves."""
    out = tmp_path / "sft"
    rc = main(["warmup", "--model", str(warm_entry.path), "--gen-steps", "2", "--n-docs", "16",
               "--batch-size", "4", "--lr", "1e-3", "--out", str(out)])  # fmt: skip
    assert rc == 0 and (out / "model.safetensors").exists()
