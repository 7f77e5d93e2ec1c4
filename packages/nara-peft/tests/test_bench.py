"""bench / demo plumbing on a tiny budget (the numbers themselves are in the claim test)."""

from __future__ import annotations

import json

import torch


def test_bench_small(tmp_path, capsys):
    from nara_peft.cli import main

    torch.set_num_threads(1)
    out = tmp_path / "b.json"
    rc = main(
        [
            "--quiet",
            "bench",
            "--steps",
            "3",
            "--eval-n",
            "20",
            "--reps",
            "1",
            "--no-midsize",
            "--json",
            str(out),
        ]
    )
    assert rc == 0
    table = capsys.readouterr().out
    assert "| nara_r4 | 6224 |" in table and "merged LoRA" in table
    rep = json.loads(out.read_text())
    arms = {r["arm"]: r for r in rep["table"]}
    assert set(arms) == {"lora_r4", "lora_r6", "nara_const_r4", "nara_r4"}
    assert arms["lora_r4"]["train_x"] == 1.0


def test_demo_flat_dict():
    from nara_peft.demo import run

    d = run(steps=3, eval_n=20)
    assert d["nara_r4_params"] == 6224 and d["lora_r6_params"] == 6144
    assert all(isinstance(v, (int, float, str)) for v in d.values())
