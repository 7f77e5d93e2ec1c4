"""CLI (through llmcore.cli.run_main) and the file formats: --help without torch, synth,
convert, fit from a saved step dataset, generate / eval / score-trajectories on the world."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
from monica_syco.cli import main


def test_help_does_not_import_torch():
    code = (
        "import sys\nfrom monica_syco.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_synth_and_convert(tmp_path):
    assert main(["synth", "--out", str(tmp_path / "w"), "--n-entities", "6"]) == 0
    items = (tmp_path / "w" / "items_test.jsonl").read_text().splitlines()
    assert items and json.loads(items[0])["gold"]
    f = tmp_path / "a.jsonl"
    f.write_text(
        json.dumps(
            {
                "question": "Agree?",
                "answer_matching_behavior": "(A)",
                "answer_not_matching_behavior": "(B)",
            }
        )
        + "\n"
    )
    assert main(["convert", "--from", "anthropic", str(f), "--out", str(tmp_path / "o.jsonl")]) == 0


def test_bad_flag_value_is_a_clean_error(tmp_path, capsys):
    rc = main(["synth", "--out", str(tmp_path), "--n-entities", "0"])
    assert rc == 2 and "n_entities" in capsys.readouterr().err


def test_dataset_round_trip_fit_generate_eval_score(fitted, world_entry, world, tmp_path, capsys):
    from monica_syco import StepDataset
    from monica_syco.items import save_items

    _, _, ds = fitted
    ds.save(tmp_path / "steps")
    back = StepDataset.load(tmp_path / "steps")
    assert np.array_equal(back.states, ds.states) and back.layers == ds.layers
    assert back.engaged is not None and np.array_equal(back.engaged, ds.engaged)
    run = tmp_path / "run"
    assert (
        main(["fit", "--steps", str(tmp_path / "steps"), "--out", str(run), "--layers", "2,3"]) == 0
    )
    meta = json.loads((run / "monitor.json").read_text())
    assert meta["layers"] == [2, 3] and len(meta["model_fingerprint"]) == 64
    assert (run / "calibrator.safetensors").exists()
    items = world.items("test")[:4]
    save_items(items, tmp_path / "items.jsonl")
    model = str(world_entry.path)
    traj = tmp_path / "traj.jsonl"
    common = ["--model", model, "--monitor", str(run), "--max-new-tokens", "72"]
    assert (
        main(
            [
                "generate",
                *common,
                "--calibrator",
                str(run),
                "--items",
                str(tmp_path / "items.jsonl"),
                "--out",
                str(traj),
            ]
        )
        == 0
    )
    rows = [json.loads(x) for x in traj.read_text().splitlines()]
    assert [r["id"] for r in rows] == [it.id for it in items] and all(r["sds"] for r in rows)
    # resume: a second run writes nothing new
    assert (
        main(["generate", *common, "--items", str(tmp_path / "items.jsonl"), "--out", str(traj)])
        == 0
    )
    assert len(traj.read_text().splitlines()) == 4
    out = tmp_path / "report.json"
    assert (
        main(
            [
                "eval",
                *common,
                "--calibrator",
                str(run),
                "--items",
                str(tmp_path / "items.jsonl"),
                "--methods",
                "none,monica",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert set(json.loads(out.read_text())) == {"none", "monica"}
    scored = tmp_path / "scored.jsonl"
    assert (
        main(
            [
                "score-trajectories",
                "--model",
                model,
                "--monitor",
                str(run),
                "--traj",
                str(traj),
                "--out",
                str(scored),
            ]
        )
        == 0
    )
    s = [json.loads(x) for x in scored.read_text().splitlines()]
    assert len(s) == 4 and all(len(r["sds"]) == len(t["sds"]) for r, t in zip(s, rows, strict=True))
