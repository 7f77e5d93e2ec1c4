from __future__ import annotations

import json
import subprocess
import sys

import pytest
from spec_align.cli import main
from spec_align.errors import DataFormatError
from spec_align.judge import RuleJudge
from spec_align.pipeline import evaluate, generate
from spec_align.prompts import TINY_TEMPLATES
from spec_align.ttd import Align3, Vanilla


def test_generate_evaluate_resume(tiny, synth, tmp_path):
    out = tmp_path / "res" / "generate.json"
    recs = generate(
        synth, Align3(templates=TINY_TEMPLATES), tiny, out=out, batch_size=4, progress=False
    )
    assert len(recs) == len(synth.items)
    first = recs[0]
    assert set(first) >= {"data", "prompt", "response", "thought", "usage", "calls"}
    assert first["calls"] == 3 and first["data"]["label"] in ("safe", "unsafe")
    assert json.loads(out.read_text()) == recs
    assert (tmp_path / "res" / "generate_usage.json").exists()
    # Simulate a crash after 5 items: the partial file keeps them, a rerun does only the rest.
    part = out.with_name("generate.json.partial.jsonl")
    lines = part.read_text().splitlines()
    part.write_text("\n".join(lines[:5]) + "\n")
    before = tiny.calls
    again = generate(
        synth, Align3(templates=TINY_TEMPLATES), tiny, out=out, batch_size=4, progress=False
    )
    assert tiny.calls - before == 3 * (len(synth.items) - 5)
    assert [r["id"] for r in again] == [r["id"] for r in recs]
    ev, rep = evaluate(again, synth, RuleJudge(), out_dir=out.parent, progress=False)
    score = json.loads((out.parent / "rule_score.json").read_text())
    assert score["full_dataset_SAR"]["count"] == len(synth.items)
    assert score == rep.to_official()
    assert ev[0]["eval"]["result"]["score"]["alpha"] == 0.3


def test_generation_records_must_have_labels(synth):
    with pytest.raises(DataFormatError, match=r"record 0 lacks data\.label"):
        evaluate([{"data": {}, "response": "x"}], synth, RuleJudge(), progress=False)


def test_cli_end_to_end(tmp_path, capsys):
    data = tmp_path / "data"
    assert (
        main(
            ["data", "synth", "--seed", "4", "--n-safe", "3", "--n-unsafe", "3", "--out", str(data)]
        )
        == 0
    )
    assert main(["data", "validate", str(data)]) == 0
    gen = tmp_path / "r" / "generate.json"
    generate_synth4 = [
        "generate",
        "--scenario",
        "Synth4",
        "--data-dir",
        str(data),
        "--out",
        str(gen),
    ]
    assert (
        main(
            [
                *generate_synth4,
                "--backend",
                "tiny",
                "--method",
                "vanilla",
                "--tiny-templates",
                "--max-new-tokens",
                "96",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "evaluate",
                "--generations",
                str(gen),
                "--scenario",
                "Synth4",
                "--data-dir",
                str(data),
                "--judge",
                "rule",
            ]
        )
        == 0
    )
    assert (
        main(["score", "--evaluations", str(tmp_path / "r" / "rule_evaluate.json"), "--recompute"])
        == 0
    )
    out = capsys.readouterr().out
    assert "full dataset" in out
    # Bad input: clear one-line errors, exit code 2.
    child = ["evaluate", "--generations", str(gen), "--scenario", "Child", "--judge", "rule"]
    assert main(child) == 2  # the folder holds judged items of another scenario
    assert "holds judged items of scenario ['Synth4']" in capsys.readouterr().err
    assert main([*child, "--out-dir", str(tmp_path / "child")]) == 2
    assert "no rules.json" in capsys.readouterr().err
    assert main([*generate_synth4, "--backend", "bogus:x"]) == 2
    assert "valid: hf:" in capsys.readouterr().err
    assert main([*generate_synth4, "--backend", "tiny", "--method", "best_of_n"]) == 2
    assert "--reward" in capsys.readouterr().err


def test_help_does_not_import_torch():
    code = (
        "import sys\nfrom spec_align.cli import main\ntry:\n    main(['--help'])\n"
        "except SystemExit:\n    pass\nassert 'torch' not in sys.modules, 'torch imported'\n"
        "assert 'transformers' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=60)


def test_vanilla_official_record_fields(tiny, synth):
    rec = generate(synth, Vanilla(TINY_TEMPLATES), tiny, limit=2, progress=False)
    assert rec[0]["prompt"] == synth.items[0].adversarial_prompt
    assert rec[0]["usage"]["total_tokens"] == (
        rec[0]["usage"]["prompt_tokens"] + rec[0]["usage"]["completion_tokens"]
    )


def test_registered_method():
    import spec_align

    from llmcore.registry import discover

    methods = discover()
    assert methods["spec-align"].demo == "spec_align.demo:run"
    assert spec_align.METHOD.name == "spec-align"


def test_ttd_config_yaml(tmp_path):
    from spec_align.config import TTDConfig

    p = tmp_path / "ttd.yaml"
    p.write_text(
        "self_refine:\n  max_iters: 2\n  max_history_length: 1\nmore_think:\n  rethink_count: 4\n"
    )
    cfg = TTDConfig.from_yaml(p)
    assert cfg.self_refine.max_iters == 2 and cfg.more_think.rethink_count == 4
    p.write_text("more_think:\n  rethinks: 4\n")
    with pytest.raises(ValueError, match="unknown keys"):
        TTDConfig.from_yaml(p)
