"""The ``edit``, ``geometry``, ``capability`` and ``sweep`` commands end to end on the cached world
model (small limits: 2 edits, 2 probe layers, 3 lm-eval documents)."""

from __future__ import annotations

import json

import pytest
import yaml
from edit_collapse.cli import main

from llmcore.data import read_jsonl


def _edit(w, out, method, capsys):
    args = ["edit", "--model", w["model"], "--method", method, "--data", w["data"], "--fmt", "jsonl",
            "--n-edits", "2", "--eval-at", "2", "-o", str(out)]  # fmt: skip
    args += ["--hparams", w["hparams"]] if method == "ft-m" else ["--encoder", "bm25"]
    assert main(args) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert [r["n_edits"] for r in rows] == [2] and rows[0]["method"] == method
    return rows[0]


def test_edit_then_geometry(cli_world, tmp_path, capsys):
    """``edit`` (FT-M, 2 edits) saves only changed tensors; ``geometry --after`` reads them back
    and finds nonzero relative change R_k at the edited layer's output."""
    w = cli_world
    row = _edit(w, tmp_path / "ft", "ft-m", capsys)
    assert 0.0 <= row["rel"] <= 1.0 and (tmp_path / "ft" / "deltas.safetensors").is_file()
    assert len(list(read_jsonl(tmp_path / "ft" / "results.jsonl"))) == 2
    probe = tmp_path / "probe.txt"
    probe.write_text("\n".join(r["prompt"] for r in read_jsonl(w["data"])) + "\n")
    out = tmp_path / "geom.jsonl"
    assert main(["geometry", "--model", w["model"], "--probe", str(probe), "--layers", "1,3",
                 "--after", str(tmp_path / "ft"), "-o", str(out)]) == 0  # fmt: skip
    summ = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [s["layer"] for s in summ] == [1, 3]
    assert all(s["effective_rank"] > 1.0 for s in summ)
    rows = list(read_jsonl(out))
    assert {r["layer"] for r in rows} == {1, 3}
    # FT-M edits layer 2's MLP: the last block's probe states move, so some R_k > 0
    assert max(r["R"] for r in rows if r["layer"] == 3) > 0.0


def test_capability_on_local_task(cli_world, tmp_path, capsys):
    """``capability`` on the local reasoning task (3 documents), plain and with a retrieval
    memory from ``edit``: the edited run's accuracy is in [0, 1] and the memory is read."""
    pytest.importorskip("lm_eval")
    from edit_collapse import world as W
    from edit_collapse.capability import REASONING_TASK, write_reasoning_task

    w = cli_world
    _, held = W.reasoning_problems(0)
    write_reasoning_task(tmp_path / "tasks", held[:3])
    _edit(w, tmp_path / "ret", "retrieval", capsys)
    assert (tmp_path / "ret" / "memory.jsonl").is_file()
    accs = []
    for extra in ([], ["--edited", str(tmp_path / "ret"), "--encoder", "bm25"]):
        assert main(["capability", "--model", w["model"], "--tasks", REASONING_TASK, "--limit", "3",
                     "--include-path", str(tmp_path / "tasks"), *extra]) == 0  # fmt: skip
        res = json.loads(capsys.readouterr().out)
        (metrics,) = res.values()
        accs.append(next(v for k, v in metrics.items() if k.startswith("exact_match")))
    assert all(0.0 <= a <= 1.0 for a in accs)


def test_sweep_resumes(cli_world, tmp_path, capsys):
    """``sweep`` over FT-M and retrieval x {1, 2} edits writes one row per cell; a second run
    skips every finished cell."""
    w = cli_world
    out = tmp_path / "sweep.jsonl"
    cfg = {"model": w["model"], "methods": ["ft-m", "retrieval"], "n_edits": [1, 2], "data": w["data"],
           "fmt": "jsonl", "hparams": {"ft-m": w["hparams"]}, "encoder": "bm25", "out": str(out)}  # fmt: skip
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["sweep", "--config", str(tmp_path / "sweep.yaml")]) == 0
    rows = list(read_jsonl(out))
    assert sorted(r["id"] for r in rows) == ["requests:ft-m:1", "requests:ft-m:2",
                                             "requests:retrieval:1", "requests:retrieval:2"]  # fmt: skip
    assert all(0.0 <= r["avg"] <= 1.0 for r in rows)
    capsys.readouterr()
    assert main(["sweep", "--config", str(tmp_path / "sweep.yaml")]) == 0
    assert capsys.readouterr().out == "" and len(list(read_jsonl(out))) == 4
