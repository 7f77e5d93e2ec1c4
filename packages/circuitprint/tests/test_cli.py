"""Command line: --help stays torch-free, errors are one line with exit 2, verify's exit
codes follow the verdict, registry entries resolve."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from circuitprint.cli import main


def test_help_does_not_import_torch():
    code = ("import sys; from circuitprint.cli import build_parser; build_parser(); "
            "import circuitprint; circuitprint.METHOD; assert 'torch' not in sys.modules")  # fmt: skip
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("cmd", ["discover", "triggers", "verify", "robustness", "baselines",
                                 "demo-tiny", "bench"])  # fmt: skip
def test_subcommand_help(cmd, capsys):
    with pytest.raises(SystemExit) as e:
        main([cmd, "--help"])
    assert e.value.code == 0 and "usage" in capsys.readouterr().out


def test_user_errors_exit_codes(tmp_path, capsys):
    assert main(["verify", "--signature", str(tmp_path / "missing.json"), "--suspect", "x"]) == 3
    assert "cannot read signature" in capsys.readouterr().err
    sig = tmp_path / "s.json"
    sig.write_text(json.dumps({"version": 1, "triggers": [], "protected_model": {},
                               "tokenizer": {}, "config": {}}))  # fmt: skip
    assert main(["verify", "--signature", str(sig), "--suspect", "x", "--p-max", "2"]) == 3
    assert "p_max" in capsys.readouterr().err
    rc = main(["robustness", "--signature", str(tmp_path / "none.json"), "--model", "m"])
    assert rc == 2 and "cannot read signature" in capsys.readouterr().err


def test_registry_entries():
    from circuitprint import METHOD
    from circuitprint.fixtures import FIXTURES

    assert METHOD.demo == "circuitprint.demo:run"
    assert {f.name for f in FIXTURES} >= {"circuitprint-p", "circuitprint-derivatives"}
    for f in FIXTURES:
        assert callable(f.load_builder())


def test_robustness_command_on_a_tiny_random_model(tmp_path, task_tok, capsys):
    """`robustness` end to end on a random 2-layer Llama saved to disk and a hand-made
    signature whose triggers record that model's own greedy answers: the permuted copy keeps
    TMR 1.00 exactly (a function-preserving transform), every requested transform is reported,
    and fine-tuning transforms without --data fail with a one-line error."""
    from circuitprint import task
    from circuitprint.triggers import Signature
    from circuitprint.verify import HFSuspect
    from conftest import make_llama

    model = make_llama(vocab=len(task_tok), seed=3)
    mdir = tmp_path / "model"
    model.save_pretrained(mdir)
    task_tok.save_pretrained(mdir)
    clean = [ex.prompt for ex in task.sample_examples(8, seed=1)]
    trig = [ex.prompt for ex in task.sample_examples(8, seed=2)]
    s = HFSuspect(model, task_tok)
    ys, yps = s.answer(clean), s.answer(trig)
    triggers = [{"id": k, "prompt": c, "trigger_prompt": t, "answer": y, "shifted_answer": yp}
                for k, (c, t, y, yp) in enumerate(zip(clean, trig, ys, yps, strict=True))]  # fmt: skip
    sig = tmp_path / "sig.json"
    Signature(triggers, {"name": "random"}, {}, {}).save(sig)
    data = tmp_path / "ft.jsonl"
    data.write_text("".join(json.dumps({"text": ex.document}) + "\n"
                            for ex in task.sample_examples(16, seed=4)))  # fmt: skip
    out = tmp_path / "rob.json"
    rc = main(["robustness", "--signature", str(sig), "--model", str(mdir), "--transforms",
               "permute,int8,prune,ft,ties", "--data", str(data), "--steps", "2", "--lr", "1e-3",
               "--out", str(out)])  # fmt: skip
    assert rc == 0
    rep = json.loads(out.read_text())
    assert list(rep) == ["permute", "int8", "prune", "ft", "ties"]
    assert rep["permute"]["tmr"] == 1.0 and rep["permute"]["verdict"] == "derived"
    for r in rep.values():
        assert 0.0 <= r["tmr"] <= 1.0
        assert r["verdict"] in ("derived", "independent", "inconclusive")
    assert "permute: derived TMR 1.00" in capsys.readouterr().out
    rc = main(["robustness", "--signature", str(sig), "--model", str(mdir), "--transforms", "ft"])
    assert rc == 2 and "--data" in capsys.readouterr().err
    rc = main(["robustness", "--signature", str(sig), "--model", str(mdir), "--transforms", "x"])
    assert rc == 2 and "unknown transform" in capsys.readouterr().err


def test_demo_finds_cached_fixtures(zoo_models):
    """The demo reuses the registered fixtures when cached: the never-building lookup must
    find exactly the entries the fixture builders made (same cache keys)."""
    from circuitprint import tiny

    found = tiny.lookup_fixture_models()
    assert found is not None
    want = {"P": "P", "FT": "FT1", "M-lin": "M-lin", "I": "I3"}
    assert {k: e.key for k, e in found.items()} == {k: zoo_models[v].key for k, v in want.items()}


@pytest.mark.parametrize("flag", ["--n", "--n-triggers"])
def test_signature_size_flag_spellings(flag):
    from circuitprint.cli import build_parser
    from circuitprint.config import TriggerConfig

    from llmcore.config import config_from_args

    args = build_parser().parse_args(["triggers", "--model", "m", "--supernodes", "s", flag, "8"])
    assert config_from_args(TriggerConfig, args).n_triggers == 8
    args = build_parser().parse_args(["triggers", "--model", "m", "--supernodes", "s"])
    assert config_from_args(TriggerConfig, args).n_triggers == TriggerConfig().n_triggers
