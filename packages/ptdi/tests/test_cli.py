"""The ``ptdi`` command line end to end on a tiny random model saved to disk."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from ptdi.cli import main


def test_help_does_not_import_torch():
    code = "import sys; from ptdi.cli import build_parser; build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tiny_pair):
    model, tok = tiny_pair
    d = tmp_path_factory.mktemp("tiny-model")
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return d


def test_score_select_evaluate(tmp_path, model_dir, capsys):
    rng = np.random.default_rng(0)
    rows = []
    for i in range(60):
        words = " ".join(f"w{x}" for x in rng.integers(0, 40, size=8))
        role = "calibration" if i < 30 else "test"
        label = 0 if i < 30 else int(i % 2)
        rows.append({"id": f"d{i}", "text": words, "role": role, "label": label})
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    scores = tmp_path / "scores.jsonl"
    argv = ["score", "--model", str(model_dir), "--data", str(data), "--out", str(scores),
            "--scores", "loss,zlib,mink,minkpp", "--batch-size", "16", "--device", "cpu"]  # fmt: skip
    assert main(argv) == 0
    meta = json.loads((tmp_path / "scores.meta.json").read_text())
    assert meta["orientation"] == {
        s: "higher_is_member" for s in ("loss", "zlib", "mink", "minkpp")
    }
    assert meta["k"] == 0.2 and meta["max_length"] == 512
    out = tmp_path / "result.json"
    assert main(["select", "--scores", str(scores), "--score", "mink", "--alpha", "0.2",
                 "--out", str(out)]) == 0  # fmt: skip
    res = json.loads(out.read_text())
    assert {"alpha", "pi_estimator", "jkbb_gamma", "jkbb_z", "pi0_hat", "n_cal", "m", "threshold",
            "selected_ids", "pvalues", "scaled_pvalues", "fdp", "power"} <= set(res)  # fmt: skip
    assert res["n_cal"] == 30 and res["m"] == 30
    ev = tmp_path / "eval.json"
    assert main(["evaluate", "--scores", str(scores), "--score", "loss", "--n-exp", "20",
                 "--alphas", "0.2,0.5", "--out", str(ev)]) == 0  # fmt: skip
    assert set(json.loads(ev.read_text())["results"]) == {"bh", "storey", "jkbb"}
    # errors are reported as usage errors, not tracebacks
    assert main(["select", "--scores", str(scores), "--score", "mink", "--alpha", "1.5"]) == 2
    assert "alpha must lie in (0, 1)" in capsys.readouterr().err
    assert main(["score", "--model", str(model_dir), "--data", str(data), "--backend", "vllm",
                 "--scores", "minkpp", "--out", str(tmp_path / "x.jsonl")]) == 2  # fmt: skip
    assert "Min-K%++" in capsys.readouterr().err


def test_simulate_cli(tmp_path, capsys):
    out = tmp_path / "sim.json"
    assert main(["simulate", "--n-cal", "50", "--m", "100", "--reps", "20", "--alphas", "0.1,0.2",
                 "--out", str(out)]) == 0  # fmt: skip
    assert "jkbb_z0" in capsys.readouterr().out
    assert json.loads(out.read_text())["reps"] == 20


def test_peft_adapter_attached_equals_merged(tmp_path, model_dir):
    import torch
    from peft import LoraConfig, get_peft_model
    from ptdi.scoring import MembershipScorer, load_target

    base, tok = load_target(str(model_dir), device="cpu")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        peft_model = get_peft_model(
            base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
        )
    adapter = tmp_path / "adapter"
    peft_model.save_pretrained(adapter)
    texts = ["w1 w2 w3 w4 w5", "w9 w8 w7 w6"]
    plain = MembershipScorer(load_target(str(model_dir), device="cpu")[0], tok).score(texts)
    att, _ = load_target(str(model_dir), device="cpu", adapter=str(adapter))
    mer, _ = load_target(str(model_dir), device="cpu", adapter=str(adapter), merge_adapter=True)
    s_att = MembershipScorer(att, tok).score(texts)
    s_mer = MembershipScorer(mer, tok).score(texts)
    for k in s_att:
        assert np.allclose(s_att[k], s_mer[k], rtol=1e-3, atol=1e-4), k  # merge rounds weights
    assert not np.allclose(s_att["loss"], plain["loss"], atol=1e-4)  # the adapter does act
