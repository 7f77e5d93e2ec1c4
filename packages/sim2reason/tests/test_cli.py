"""The command line end to end on a few scenes, its --help cost, and its error policy."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from sim2reason.cli import main


def test_help_does_not_import_torch():
    code = ("import sys; from sim2reason.cli import build_parser; build_parser().format_help(); "
            "import sim2reason; sim2reason.METHOD; "
            "assert 'torch' not in sys.modules and 'transformers' not in sys.modules")  # fmt: skip
    subprocess.run([sys.executable, "-c", code], check=True)


def test_pipeline_commands(tmp_path, capsys):
    scenes, recs = tmp_path / "scenes", tmp_path / "recs"
    assert main(["gen-scenes", "--types", "BasicPulley,DifficultProjectile,DifficultRocket",
                 "--n", "3", "--out", str(scenes)]) == 0  # fmt: skip
    assert len((scenes / "manifest.jsonl").read_text().splitlines()) == 9
    # A scene naming an official entity type no engine implements is a usage error.
    from sim2reason.dsl import Entity, Scene, dump_yaml

    bad = tmp_path / "bad"
    bad.mkdir()
    rack = Scene("rack", [Entity("d", "DiskRackWithSphereEntity",
                                 parameters={"mass": 1.0, "radius": 0.5, "angle": 30.0})])  # fmt: skip
    (bad / "rack.yaml").write_text(dump_yaml(rack))
    assert main(["simulate", "--scenes", str(bad), "--out", str(tmp_path / "bad_recs")]) == 2
    err = capsys.readouterr().err
    assert "DiskRackWithSphereEntity" in err and "supported families" in err
    (scenes / "manifest.jsonl").unlink()  # read every *.yaml instead
    assert main(["simulate", "--scenes", str(scenes), "--out", str(recs)]) == 0
    assert len(list(recs.glob("*.npz"))) == 9
    qa = tmp_path / "qa.jsonl"
    assert main(["gen-qa", "--scenes", str(scenes), "--recordings", str(recs),
                 "--kinds", "numeric,reverse,symbolic", "--per-scene", "4", "--out", str(qa)]) == 0  # fmt: skip
    filt = tmp_path / "qa.filtered.jsonl"
    assert main(["filter", "--qa", str(qa), "--scenes", str(scenes), "--out", str(filt)]) == 0
    n_in, n_out = len(qa.read_text().splitlines()), len(filt.read_text().splitlines())
    assert 0 < n_out <= n_in
    out = tmp_path / "export"
    assert main(["export", "--qa", str(filt), "--format", "verl", "--out", str(out)]) == 0
    assert (out / "train.parquet").is_file()
    from sim2reason.evaluate import load_eval_rows

    rows = load_eval_rows(out / "train.parquet")
    assert rows and all("\\boxed{}" in r["prompt"] for r in rows)


def test_check_answer_command(capsys):
    assert main(["check-answer", "--pred", r"\boxed{9.8}", "--gt", "9.81"]) == 0
    assert "correct: parsed 9.8" in capsys.readouterr().out
    assert main(["check-answer", "--pred", "2.3", "--gt", "2.5"]) == 1
    mapping = json.dumps({"m_{a}": 2, "F_{a}": 6, "t": 1.5})
    assert main(["check-answer", "--pred", r"\boxed{\frac{F_{a} t}{m_{a}}}", "--gt", "4.5",
                 "--kind", "symbolic", "--mapping", mapping]) == 0  # fmt: skip


def test_user_errors_exit_2(tmp_path, capsys):
    assert main(["check-answer", "--pred", "x", "--gt", "1", "--kind", "symbolic"]) == 2
    assert "needs --mapping" in capsys.readouterr().err
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "s.yaml").write_text("scene: {name: s, entities: [{name: a, type: Blob}]}")
    assert main(["simulate", "--scenes", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "entities[0].type='Blob'" in capsys.readouterr().err
    assert main(["simulate", "--scenes", str(tmp_path / "none"), "--out", str(tmp_path)]) == 2
    with pytest.raises(SystemExit):
        main(["gen-scenes", "--bogus"])
