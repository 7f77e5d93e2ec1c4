import json
import subprocess
import sys

import pytest
import torch
from conftest import make_model
from respin_quant.cli import main


def test_help_does_not_import_torch():
    code = (
        "import sys; from respin_quant.cli import build_parser\n"
        "try:\n    build_parser().parse_args(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "quantize" in r.stdout and "make-tiny" in r.stdout and "bench" in r.stdout


def test_quantize_and_eval_round_trip(tmp_path, capsys):
    model = make_model("llama", hidden=32, inter=64)
    model.save_pretrained(tmp_path / "base")
    calib = tmp_path / "c.jsonl"
    # no tokenizer in the dir -> the CLI must say what to do
    rc = main(
        [
            "quantize",
            "--model",
            str(tmp_path / "base"),
            "--method",
            "respin",
            "--calib",
            str(calib),
            "--nsamples",
            "8",
            "--seqlen",
            "16",
            "--steps",
            "1",
            "--out",
            str(tmp_path / "q"),
        ]
    )
    assert rc == 2
    assert "tokenizer" in capsys.readouterr().err
    rc = main(
        [
            "quantize",
            "--model",
            str(tmp_path / "base"),
            "--method",
            "quarot",
            "--w-bits",
            "4",
            "--a-bits",
            "4",
            "--kv-bits",
            "4",
            "--out",
            str(tmp_path / "q"),
        ]
    )
    assert rc == 0
    rep = json.loads((tmp_path / "q" / "report.json").read_text())
    assert rep["method"] == "quarot" and rep["quant"] == "W4A4KV4"


def test_bad_input_exit_code(tmp_path, capsys):
    rc = main(
        [
            "quantize",
            "--model",
            str(tmp_path / "missing"),
            "--method",
            "rtn",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert rc == 2
    assert "error" in capsys.readouterr().err
    rc = main(["check", "--model", "tiny", "--residual-rank", "x"])
    assert rc == 2


@pytest.mark.slow
def test_check_and_make_tiny_on_tiny_model(tiny_dir, capsys):
    assert main(["make-tiny"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fp_ppl"] > 1 and out["build_seconds"] > 0
    assert main(["check", "--model", "tiny", "--residual-rank", "full"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["relative"] <= 1e-4
    assert torch.isfinite(torch.tensor(res["max_abs_dlogit"]))


def test_compare_table_resumes_without_relearning(tiny_dir, tmp_path, capsys):
    """``compare`` on the tiny outlier model: FP + each method + each ReSpin rank,
    rows written as they finish; a rerun after a crash recomputes only the missing row and
    reuses the learned rotations."""
    out = tmp_path / "cmp.json"
    argv = ["compare", "--model", "tiny", "--methods", "rtn,quarot,respin", "--ranks", "0,full"]
    argv += ["--steps", "2", "--batch-size", "4", "--w-clip-grid", "3", "--json", str(out)]
    assert main(argv) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["method"] for r in rows] == ["fp", "rtn", "quarot", "respin r=0", "respin r=full"]
    assert rows[0]["ppl_ratio"] == 1.0 and rows[1]["ppl"] > rows[0]["ppl"]
    assert rows[3]["online_macs_per_token"] == 0 < rows[4]["online_macs_per_token"]
    jsonl = tmp_path / "cmp.jsonl"
    rot = next((tmp_path / "cmp.rotations").glob("rotations_respin_*.safetensors"))
    stamp = rot.stat().st_mtime_ns
    lines = jsonl.read_text().splitlines()
    jsonl.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:20])  # crash mid-write
    capsys.readouterr()
    assert main(argv) == 0
    again = json.loads(out.read_text())["rows"]
    assert [r["ppl"] for r in again] == [r["ppl"] for r in rows]
    assert rot.stat().st_mtime_ns == stamp  # not re-learned
    assert len(jsonl.read_text().splitlines()) == 5


def test_compare_bad_methods(capsys):
    assert main(["compare", "--model", "tiny", "--methods", "rtn,gptq4", "--json", "x.json"]) == 2
    assert "subset of rtn, quarot, spinquant, respin" in capsys.readouterr().err


def test_config_files_and_generated_flags(tmp_path, capsys):
    """``compare`` and ``bench`` read their config dataclass from ``--config FILE`` and typed
    flags override it; a bad file key or value exits 2 with ``respin-quant: error: ...``."""
    from respin_quant.cli import build_parser
    from respin_quant.config import BenchConfig, CompareConfig

    from llmcore.config import config_from_args

    cfg = tmp_path / "bench.yaml"
    cfg.write_text("steps: 7\nrank: 8\nthroughput: false\n")
    args = build_parser().parse_args(["bench", "--config", str(cfg), "--steps", "3"])
    b = config_from_args(BenchConfig, args)
    assert (b.steps, b.rank, b.throughput, b.lr) == (3, 8, False, 1.5)
    args = build_parser().parse_args(["compare", "--model", "tiny", "--json", "x.json"])
    assert config_from_args(CompareConfig, args) == CompareConfig()

    bad = tmp_path / "cmp.yaml"
    bad.write_text("methods: rtn,gptq4\n")
    argv = ["compare", "--model", "tiny", "--json", str(tmp_path / "o.json"), "--config", str(bad)]
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("respin-quant: error: methods='rtn,gptq4'")
    bad.write_text("stepz: 3\n")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "unknown field" in err and "steps" in err
    with pytest.raises(SystemExit) as exc:  # a badly typed flag: argparse's own exit
        main([*argv[:-2], "--steps", "many"])
    assert exc.value.code == 2
