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
