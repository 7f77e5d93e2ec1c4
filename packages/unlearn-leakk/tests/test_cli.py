"""CLI: --help without torch, leak/judge on files, clear errors."""

from __future__ import annotations

import json
import subprocess
import sys

from unlearn_leakk.cli import main


def test_help_does_not_import_torch():
    code = (
        "import sys; from unlearn_leakk.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def _gen_file(tmp_path):
    rows = [
        {
            "id": f"q{i}",
            "prompt": "p",
            "question": "q",
            "ground_truth": "Paris",
            "responses": [
                {"response": r, "rougeL_recall": 0.0, "exact_match": float("Paris" in r)}
                for r in (["Paris"] * i + ["Rome"] * (4 - i))
            ],
            "decoding": {"temperature": 1.0, "top_p": 1.0},
        }
        for i in range(3)
    ]
    p = tmp_path / "generations_n4.json"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_leak_and_judge_commands(tmp_path, capsys):
    p = _gen_file(tmp_path)
    assert main(["judge", "--in", str(p), "--judges", "rouge,exact"]) == 0
    ev = tmp_path / "generations_n4_evaluated.json"
    assert ev.exists()
    out_csv = tmp_path / "leak.csv"
    assert (
        main(["leak", "--in", str(ev), "--judge", "exact", "--ks", "1,2,4", "--out", str(out_csv)])
        == 0
    )
    text = out_csv.read_text()
    assert text.startswith("Model,Leak@1,Leak@2,Leak@4,judge")
    # leak@1 = mean(c/n) = (0 + 1/4 + 2/4) / 3
    assert f"{0.25:.3f}" in capsys.readouterr().out


def test_cli_errors_are_clear(tmp_path, capsys):
    p = _gen_file(tmp_path)
    assert main(["leak", "--in", str(p), "--judge", "es"]) == 2
    assert "judge field 'ES' is missing" in capsys.readouterr().err
    assert main(["leak", "--in", str(p), "--judge", "exact", "--ks", "8"]) == 2
    assert "k=8 > n=4" in capsys.readouterr().err
    assert main(["leak", "--in", str(tmp_path / "none.json")]) == 2
    assert main(["judge", "--in", str(p), "--judges", "bleu"]) == 2
    assert "unknown judge 'bleu'" in capsys.readouterr().err


def test_config_file_and_flags(tmp_path, capsys):
    """UnlearnConfig/RULEConfig fields as flags: --config first, typed flags over it."""
    from unlearn_leakk.cli import _rule_cfg, _unlearn_cfg, build_parser

    cfg_file = tmp_path / "u.yaml"
    cfg_file.write_text("method: NPO\nlr: 1.0e-4\nmax_steps: 7\n")
    common = ["--model", "m", "--forget", "world", "--out", str(tmp_path / "o")]
    args = build_parser().parse_args(
        ["unlearn", *common, "--config", str(cfg_file), "--lr", "2e-4"]
    )
    cfg = _unlearn_cfg(args)
    assert (cfg.method, cfg.lr, cfg.max_steps, cfg.beta) == ("NPO", 2e-4, 7, 0.5)
    args = build_parser().parse_args(
        [
            "rule",
            *common,
            "--base-method",
            "SimNPO",
            "--lr",
            "3e-5",
            "--rounds",
            "2",
            "--n-mine",
            "8",
            "--greedy-stop",
            "0.2",
            "--mine-max-new-tokens",
            "12",
        ]
    )
    rcfg = _rule_cfg(args)
    assert (rcfg.rounds, rcfg.n_mine, rcfg.mine_decoding.n, rcfg.mine_decoding.max_new_tokens) == (
        2,
        8,
        8,
        12,
    )
    # beta resolves for the base method typed on the command line (SimNPO: 4.5)
    assert (rcfg.base.method, rcfg.base.lr, rcfg.base.beta) == ("SimNPO", 3e-5, 4.5)
    assert rcfg.base.early_stop.max_forget_acc == 0.2
    bad = tmp_path / "bad.yaml"
    bad.write_text("lrr: 1\n")
    assert main(["unlearn", *common, "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("unlearn-leakk: error:") and "'lrr' -> 'lr'" in err
    assert main(["unlearn", *common, "--method", "Foo"]) == 2
    assert "unknown unlearning method 'Foo'" in capsys.readouterr().err


def test_registered_method():
    from llmcore.registry import discover

    info = discover()["unlearn-leakk"]
    assert callable(info.load_demo())
    assert "Leak@k" in info.paper


def test_world_end_to_end_cli(world_entry, tmp_path, capsys):
    m = str(world_entry.path)
    out = tmp_path / "eval"
    args = [
        "sample",
        "--model",
        m,
        "--data",
        "world",
        "--limit",
        "3",
        "--n",
        "4",
        "--max-new-tokens",
        "10",
        "--no-chat-template",
        "--label",
        "w",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    gen = out / "w" / "forget" / "temperature=1top_p=1" / "generations_n4.json"
    assert len(gen.read_text().splitlines()) == 3
    assert main(["leak", "--in", str(gen), "--judge", "exact", "--ks", "1,4"]) == 0
    assert (
        main(
            [
                "unlearn",
                "--model",
                m,
                "--method",
                "GradDiff",
                "--forget",
                "world",
                "--retain",
                "world",
                "--max-steps",
                "1",
                "--batch-size",
                "2",
                "--grad-accum",
                "1",
                "--no-chat-template",
                "--out",
                str(tmp_path / "u"),
            ]
        )
        == 0
    )
    assert (tmp_path / "u" / "config.json").exists()
    assert (
        main(["sample", "--model", m, "--data", "world", "--temperature", "-1", "--out", str(out)])
        == 2
    )
    assert "temperature=-1" in capsys.readouterr().err


def test_world_sweep_cli(world_entry, tmp_path):
    out = tmp_path / "sweep"
    args = [
        "sweep",
        "--model",
        str(world_entry.path),
        "--data",
        "world",
        "--limit",
        "2",
        "--n",
        "4",
        "--max-new-tokens",
        "8",
        "--no-chat-template",
        "--pairs",
        "0:0,1:1",
        "--ks",
        "1,4",
        "--judges",
        "exact",
        "--label",
        "s",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    lines = (out / "s" / "sweep.csv").read_text().strip().splitlines()
    assert len(lines) == 3 and lines[0].startswith("model,judge,temperature,top_p,n,Leak@1")
