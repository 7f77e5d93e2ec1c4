"""The command line: torch-free --help, make-data (+ verl export), sft -> rl -> eval on a tiny
model, errors as exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from compgen_rl.cli import main

SMALL = ["--n-sft", "64", "--n-rl", "16", "--n-test", "8", "--n-ood", "8", "--n-probe", "1"]


def test_help_does_not_import_torch():
    code = (
        "import sys\nfrom compgen_rl.cli import build_parser\n"
        "try:\n    build_parser().parse_args(['--help'])\nexcept SystemExit:\n    pass\n"
        "print('torch' in sys.modules, 'transformers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False False"


def test_make_data_and_verl_export(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    args = [
        "make-data",
        "--strategy",
        "routing_context",
        "--depth-train",
        "2",
        "--depth-ood",
        "3",
        "--input-len",
        "4",
        *SMALL,
        "--seed",
        "1",
    ]
    assert main([*args, "--out", str(tmp_path / "a"), "--export-verl", str(tmp_path / "verl")]) == 0
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    for f in ("sft.jsonl", "rl.jsonl", "test_unseen.jsonl", "meta.json"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    import pyarrow.parquet as pq

    t = pq.read_table(tmp_path / "verl" / "rl.parquet").to_pylist()
    assert t[0]["data_source"] == "codeio-forward-incomplete-depth2"
    truth = json.loads(t[0]["reward_model"]["ground_truth"])
    assert set(truth) == {"ref_input", "ref_output", "ref_code", "funcname"}
    assert t[0]["extra_info"]["depth"] == 2


def test_errors_exit_2(tmp_path, capsys):
    assert main(["make-data", "--inventory", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown inventory 'nope'" in capsys.readouterr().err
    assert main(["eval", "--model", "x", "--data", str(tmp_path / "missing")]) == 2
    assert (
        main(["make-data", "--depth-train", "3", "--depth-ood", "2", "--out", str(tmp_path)]) == 2
    )


def test_sft_rl_eval_pipeline(tmp_path):
    data = tmp_path / "data"
    assert (
        main(
            [
                "make-data",
                "--strategy",
                "routing_context",
                "--depth-train",
                "2",
                "--depth-ood",
                "3",
                "--input-len",
                "4",
                *SMALL,
                "--out",
                str(data),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "sft",
                "--model",
                "tiny",
                "--data",
                str(data),
                "--steps",
                "2",
                "--batch-size",
                "8",
                "--out",
                str(tmp_path / "sft"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "rl",
                "--model",
                str(tmp_path / "sft"),
                "--data",
                str(data),
                "--steps",
                "1",
                "--prompts-per-step",
                "2",
                "--num-generations",
                "4",
                "--max-completion-length",
                "8",
                "--no-prefilter",
                "--out",
                str(tmp_path / "rl"),
            ]
        )
        == 0
    )
    out = tmp_path / "m.json"
    assert (
        main(
            [
                "eval",
                "--model",
                str(tmp_path / "rl"),
                "--data",
                str(data),
                "--splits",
                "test_unseen",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    res = json.loads(out.read_text())
    assert 0.0 <= res["test_unseen"]["acc"] <= 1.0 and res["test_unseen"]["n"] == 8


def test_protocol_config_from_yaml(tmp_path):
    from compgen_rl.cli import build_parser
    from compgen_rl.train import ProtocolConfig

    from llmcore.config import config_from_args

    f = tmp_path / "p.yaml"
    f.write_text("arms: [sft, sft_rl]\ngrpo: {steps: 10}\nsplit: {seed: 1}\n")
    args = build_parser().parse_args(
        ["protocol", "--config", str(f), "--out", str(tmp_path / "r.json")]
    )
    cfg = config_from_args(ProtocolConfig, args)
    assert cfg.arms == ("sft", "sft_rl") and cfg.grpo == {"steps": 10} and cfg.split == {"seed": 1}
    assert main(["protocol", "--arms", "nope"]) == 2
