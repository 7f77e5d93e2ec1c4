"""CLI end to end on a save_pretrained model directory (the path a hub model takes)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from transformers import LlamaConfig, LlamaForCausalLM

    from llmcore.zoo import train_bpe_tokenizer

    d = tmp_path_factory.mktemp("mdlm")
    texts = [f"what is {a} plus {b}? it is {a + b}." for a in range(20) for b in range(20)]
    tok = train_bpe_tokenizer(texts, vocab_size=300)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    rows = [
        {"prompt": f"what is {a} plus {b}?", "response": f"it is {a + b}."}
        for a in range(4)
        for b in range(4)
    ]
    (d / "data.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return d


def test_help_does_not_import_torch():
    code = (
        "import sys\nfrom nara_peft.cli import main\ntry:\n    main(['--help'])\n"
        "except SystemExit:\n    pass\nassert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


@pytest.mark.parametrize("method", ["nara", "lora", "nara-constant"])
def test_train_generate_eval_inspect(model_dir, tmp_path, method, capsys):
    from nara_peft.cli import main

    out = tmp_path / method
    rc = main(
        [
            "--quiet",
            "train",
            "--model",
            str(model_dir),
            "--data",
            str(model_dir / "data.jsonl"),
            "--method",
            method,
            "--r",
            "4",
            "--lr",
            "1e-3",
            "--max-length",
            "48",
            "--grad-accum",
            "2",
            "--batch-size",
            "2",
            "--epochs",
            "1",
            "--out",
            str(out),
            "--target-modules",
            "q_proj",
            "v_proj",
        ]
    )
    assert rc == 0
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    assert len(log) == 4 and all(r["loss"] > 0 for r in log)
    assert (out / "adapter_model.safetensors").exists()
    capsys.readouterr()
    assert (
        main(
            [
                "generate",
                "--model",
                str(model_dir),
                "--adapter",
                str(out),
                "--prompt",
                "what is 1 plus 2?",
                "--steps",
                "8",
                "--gen-length",
                "8",
                "--block-length",
                "4",
            ]
        )
        == 0
    )
    assert "completion" in json.loads(capsys.readouterr().out.splitlines()[0])
    assert (
        main(
            [
                "--quiet",
                "eval",
                "--model",
                str(model_dir),
                "--adapter",
                str(out),
                "--data",
                str(model_dir / "data.jsonl"),
                "--limit",
                "2",
                "--steps",
                "4",
                "--gen-length",
                "4",
                "--block-length",
                "4",
                "--out",
                str(tmp_path / "ev.jsonl"),
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["n"] == 2
    if method != "lora":
        assert main(["inspect", "--adapter", str(out), "--grid", "3"]) == 0
        assert "||C" in capsys.readouterr().out


def test_train_bad_method_and_missing_model(tmp_path, capsys):
    from nara_peft.cli import main

    with pytest.raises(SystemExit):
        main(["train", "--model", "x", "--data", "y", "--method", "adalora"])
    rc = main(
        ["train", "--model", str(tmp_path / "nope"), "--data", "y", "--out", str(tmp_path / "o")]
    )
    assert rc == 2
    assert "nara-peft: error" in capsys.readouterr().err


def test_train_flag_beats_config_file(tmp_path):
    """``--config`` sets any TrainConfig field; a typed flag overrides the file, an untyped
    one leaves the file's value."""
    from nara_peft.cli import build_parser
    from nara_peft.options import TrainConfig

    from llmcore.config import config_from_args

    cfg_file = tmp_path / "run.yaml"
    cfg_file.write_text("r: 16\nlr: 2e-4\nmethod: lora\ntarget_modules: [q_proj]\n")
    args = build_parser().parse_args(["train", "--config", str(cfg_file), "--r", "4"])
    cfg = config_from_args(TrainConfig, args)
    assert (cfg.r, cfg.lr, cfg.method, cfg.target_modules) == (4, 2e-4, "lora", ["q_proj"])
    assert cfg.grad_accum == TrainConfig().grad_accum


def test_bench_flags_and_config(tmp_path):
    from nara_peft.cli import build_parser
    from nara_peft.options import BenchConfig

    from llmcore.config import config_from_args

    cfg_file = tmp_path / "bench.json"
    cfg_file.write_text('{"seeds": [0, 1], "steps": 50, "midsize": false}')
    argv = ["bench", "--config", str(cfg_file), "--steps", "7", "--reps", "2"]
    cfg = config_from_args(BenchConfig, build_parser().parse_args(argv))
    assert cfg == BenchConfig(seeds=(0, 1), steps=7, timing_reps=2, midsize=False)


def test_config_errors_are_one_line(tmp_path, capsys):
    from nara_peft.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("rank: 4\n")
    assert main(["train", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nara-peft: error: ") and "'rank'" in err and "'r'" in err
    assert main(["train", "--r", "0"]) == 2
    assert "r must be >= 1" in capsys.readouterr().err
