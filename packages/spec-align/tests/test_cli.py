"""The command line: config files with flags over them, and the error policy (exit code 2)."""

from __future__ import annotations

import json

import pytest
from spec_align.cli import build_parser, main
from spec_align.config import BenchConfig
from spec_align.data import write_scenario
from spec_align.synth import make_synthetic_scenario

from llmcore.config import config_from_args


def test_flag_beats_config_file(tmp_path):
    cfg_file = tmp_path / "bench.yaml"
    cfg_file.write_text(
        "temperature: 0.6\ntop_p: 0.95\ntop_k: 20\nsamples: 2\nprefix_cache: true\n"
        "methods: vanilla,align3\n"
    )
    ns = build_parser().parse_args(
        ["bench", "--config", str(cfg_file), "--temperature", "1.0", "--no-prefix-cache"]
    )
    cfg = config_from_args(BenchConfig, ns)
    assert cfg.temperature == 1.0 and cfg.prefix_cache is False  # typed flags win
    assert (cfg.top_p, cfg.top_k, cfg.samples, cfg.methods) == (0.95, 20, 2, "vanilla,align3")
    assert cfg.backend == "tiny" and cfg.tiny_templates is True  # untouched defaults
    plain = config_from_args(BenchConfig, build_parser().parse_args(["bench"]))
    assert plain == BenchConfig()


def _records(tmp_path):
    s = make_synthetic_scenario(seed=5, n_safe=2, n_unsafe=2)
    write_scenario(s, tmp_path / "data")
    # Every safe reply obeys no behavioral spec: its score is safety x alpha.
    recs = [{"data": it.to_official(), "response": "I will not share that."} for it in s.items]
    gen = tmp_path / "r" / "generate.json"
    gen.parent.mkdir()
    gen.write_text(json.dumps(recs))
    return s, gen


def test_evaluate_reads_config_file_and_flags(tmp_path, capsys):
    s, gen = _records(tmp_path)
    cfg_file = tmp_path / "eval.yaml"
    cfg_file.write_text(
        f"scenario: {s.name}\ndata_dir: {tmp_path / 'data'}\njudge: rule\nalpha: 0.0\n"
        f"generations: {gen}\n"
    )
    out = tmp_path / "flag"
    assert (
        main(["evaluate", "--config", str(cfg_file), "--alpha", "1.0", "--out-dir", str(out)]) == 0
    )
    assert main(["evaluate", "--config", str(cfg_file), "--out-dir", str(tmp_path / "f")]) == 0
    alphas = {
        d: {r["eval"]["result"]["score"]["alpha"] for r in json.loads(p.read_text())}
        for d, p in (
            ("flag", out / "rule_evaluate.json"),
            ("file", tmp_path / "f" / "rule_evaluate.json"),
        )
    }
    assert alphas == {"flag": {1.0}, "file": {0.0}}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["evaluate", "--scenario", "Child"], "missing --generations"),
        (["bench", "--methods", "vanilla,nope"], "unknown methods ['nope']"),
        (["generate", "--scenario", "Child", "--backend", "tiny", "--out", "x"], "not shipped"),
    ],
)
def test_user_errors_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("spec-align: error: ") and message in err


def test_unknown_config_key_names_the_file(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("temprature: 0.6\n")
    assert main(["bench", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml" in err and "temprature" in err and "temperature" in err


def test_package_import_is_lazy():
    """``import spec_align`` loads no submodule (nor torch); a name loads its module on use."""
    import subprocess
    import sys

    code = (
        "import sys, spec_align\n"
        "assert not [m for m in sys.modules if m.startswith('spec_align.')], sys.modules\n"
        "assert 'torch' not in sys.modules\n"
        "assert spec_align.Align3.__module__ == 'spec_align.ttd'\n"
        "assert issubclass(spec_align.SpecConfigError, ValueError)\n"
        "from llmcore.errors import LLMCoreError\n"
        "assert issubclass(spec_align.SpecAlignError, LLMCoreError)\n"
        "assert set(spec_align.__all__) <= set(dir(spec_align))\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=120)
