"""The command line: --help without torch, measure/intervene/compare on a saved tiny model."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import make_model
from sink_probe.cli import main


def test_help_does_not_import_torch():
    code = (
        "import sys; from sink_probe.cli import build_parser; build_parser().format_help(); "
        "import sink_probe; sink_probe.METHOD; print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory, stream_tok):
    path = tmp_path_factory.mktemp("m")
    model = make_model(layers=2)
    model.save_pretrained(path)
    stream_tok.save_pretrained(path)
    return path


def test_measure_and_intervene_write_reports(saved_model, tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = main(["measure", "--model", str(saved_model), "--synthetic", "6", "--T", "32",
               "--tau-abs", "none", "--tau-ratio", "50", "-o", str(out)])  # fmt: skip
    assert rc == 0
    rep = json.loads(out.read_text())
    assert rep["T"] == 32 and len(rep["sink_rate_by_pos"]) == 32 and "0" in rep["mixing"]
    assert "| layer |" in capsys.readouterr().out
    out2 = tmp_path / "i.json"
    rc = main(["intervene", "--model", str(saved_model), "--synthetic", "6", "--T", "32",
               "--drop-sink-attention", "--layers", "1", "--eval", "ppl", "-o", str(out2)])  # fmt: skip
    res = json.loads(out2.read_text())
    assert rc == 0 and res["before"]["ppl"] > 1 and res["after"]["ppl"] != res["before"]["ppl"]
    assert res["after"]["report"]["sink_mass"][1][0] < 1e-6


def test_user_errors_exit_2(saved_model, capsys):
    rc = main(["measure", "--model", str(saved_model), "--synthetic", "2", "--T", "1"])
    assert rc == 2 and "T must be an integer >= 2" in capsys.readouterr().err
    rc = main(["measure", "--model", str(saved_model)])
    assert rc == 2 and "exactly one text source" in capsys.readouterr().err


def test_compare_builds_variant_table(tmp_path, stream_tok):
    from sink_probe.data import stream_texts
    from sink_probe.probe import probe

    for name in ("a", "b"):
        rep = probe(make_model(layers=2, seed=ord(name)), stream_tok, stream_texts(4), T=32,
                    tau_abs=None, tau_ratio=50.0)  # fmt: skip
        d = tmp_path / name
        d.mkdir()
        (d / "report.json").write_text(
            json.dumps({"variant": name, "metrics": {"eval_loss": 3.0}, "report": rep.to_dict()})
        )
    out = tmp_path / "t.md"
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines[0].startswith("| variant | sink/median") and len(lines) == 4


@pytest.mark.slow
def test_intervene_scores_a_local_lm_eval_task_on_the_hooked_model(tmp_path, stream_tok):
    """``--eval lm-eval:TASK`` runs lm-eval on the hooked model: a local ``generate_until``
    task whose targets are the unhooked model's own greedy continuations scores exact match 1.0
    before the intervention (lm-eval's generation equals ``generate``) and less after it
    (dropping the sink's attention changes what lm-eval generates)."""
    pytest.importorskip("lm_eval")
    import torch
    from sink_probe.data import stream_texts

    from llmcore import lmeval
    from llmcore.data import write_jsonl

    model = make_model(layers=2, vocab=len(stream_tok))
    model.save_pretrained(tmp_path / "m")
    stream_tok.save_pretrained(tmp_path / "m")
    rows = []
    for text in stream_texts(8, seed=5):
        prompt = " ".join(text.split()[:12])
        ids = torch.tensor([stream_tok(prompt, add_special_tokens=False)["input_ids"]])
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=3, do_sample=False, pad_token_id=0)
        cont = stream_tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
        rows.append({"prompt": prompt, "target": cont})
    write_jsonl(tmp_path / "d.jsonl", rows)
    lmeval.write_generate_until_task(
        tmp_path / "tasks", task="sink_stream_next", data_files=tmp_path / "d.jsonl",
        doc_to_text="{{prompt}}", doc_to_target="{{target}}", generation_kwargs={"max_gen_toks": 3},
    )  # fmt: skip
    out = tmp_path / "i.json"
    rc = main(["intervene", "--model", str(tmp_path / "m"), "--synthetic", "4", "--T", "32",
               "--drop-sink-attention", "--eval", "lm-eval:sink_stream_next",
               "--eval-include", str(tmp_path / "tasks"), "-o", str(out)])  # fmt: skip
    res = json.loads(out.read_text())
    key = "lm-eval:sink_stream_next"
    before = res["before"][key]["sink_stream_next"]["exact_match"]
    after = res["after"][key]["sink_stream_next"]["exact_match"]
    print(f"exact match before {before}, under drop_sink_attention {after}")
    assert rc == 0 and before == 1.0 and after < 1.0
