"""CLI (help without torch, make-synthetic, errors as one line), loaders and the EasyEdit shim."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from edit_collapse.cli import main
from edit_collapse.requests import EditRequest, load_requests


def test_help_does_not_import_torch():
    code = "import sys; from edit_collapse.cli import build_parser; build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_make_synthetic_and_jsonl_roundtrip(tmp_path):
    assert (
        main(
            [
                "make-synthetic",
                "-o",
                str(tmp_path),
                "--entities",
                "10",
                "--relations",
                "2",
                "--n-edits",
                "5",
            ]
        )
        == 0
    )
    reqs = load_requests(tmp_path / "requests.jsonl", fmt="jsonl")
    assert len(reqs) == 5 and all(r.subject in r.prompt for r in reqs)
    assert reqs[0].portability["two_hop"][0][1]


def test_cli_bad_input_is_one_line(tmp_path, capsys):
    assert (
        main(
            [
                "edit",
                "--model",
                "x",
                "--method",
                "rome",
                "--data",
                str(tmp_path / "no.json"),
                "-o",
                str(tmp_path),
            ]
        )
        == 2
    )
    assert "does not exist" in capsys.readouterr().err


def test_zsre_counterfact_easyedit_loaders(tmp_path):
    z = [{"src": "What is the capital of Kazo?", "subject": "Kazo", "alt": "Velmun", "answers": ["Tor"],
          "rephrase": "Kazo's capital is?", "loc": "nq question: who wrote it", "loc_ans": "Sam"}]  # fmt: skip
    (tmp_path / "z.json").write_text(json.dumps(z))
    (r,) = load_requests(tmp_path / "z.json", "zsre")
    assert (r.target_new, r.ground_truth, r.rephrase, r.locality["neighborhood"][0]) == (
        "Velmun", "Tor", ["Kazo's capital is?"], ("who wrote it", "Sam"))  # fmt: skip
    cf = [{"case_id": 3, "requested_rewrite": {"prompt": "{} plays", "subject": "Ann", "target_new": {"str": "golf"},
           "target_true": {"str": "chess"}}, "paraphrase_prompts": ["Ann likes"], "neighborhood_prompts": ["Bo plays"]}]  # fmt: skip
    (tmp_path / "cf.json").write_text(json.dumps(cf))
    (r,) = load_requests(tmp_path / "cf.json", "counterfact")
    assert (r.prompt, r.target_new, r.case_id) == ("Ann plays", "golf", 3)
    ee = [{"prompt": "Ann plays", "subject": "Ann", "target_new": "golf",
           "locality": {"nb": {"prompt": ["Bo plays", "Cy plays"], "ground_truth": ["a"]}}}]  # fmt: skip
    (tmp_path / "ee.json").write_text(json.dumps(ee))
    with pytest.raises(ValueError, match="2 prompts and 1 answers"):
        load_requests(tmp_path / "ee.json", "easyedit")
    with pytest.raises(ValueError, match="lacks field"):
        load_requests(tmp_path / "z.json", "counterfact")


def test_easyedit_compat_shapes(random_pair, small_world):
    from edit_collapse.compat import EasyEditCompat
    from edit_collapse.config import EditConfig
    from edit_collapse.editors import ROMEEditor
    from edit_collapse.requests import world_requests

    model, tok = random_pair
    reqs = world_requests(small_world, 2)
    ed = ROMEEditor(
        EditConfig("ROME", layers=[1], context_template_length_params=[[3, 1]], v_num_grad_steps=2)
    )
    metrics, m, handle = EasyEditCompat(ed, model, tok).edit(
        prompts=[r.prompt for r in reqs], target_new=[r.target_new for r in reqs], subject=[r.subject for r in reqs],
        rephrase_prompts=[r.rephrase[0] for r in reqs],
        locality_inputs={"neighborhood": {"prompt": [r.locality["neighborhood"][0][0] for r in reqs],
                                          "ground_truth": [r.locality["neighborhood"][0][1] for r in reqs]}},
        sequential_edit=True,
    )  # fmt: skip
    assert m is model and len(metrics) == 2
    assert set(metrics[0]) == {"case_id", "requested_rewrite", "time", "pre", "post"}
    assert "neighborhood_acc" in metrics[0]["post"]["locality"] and metrics[0]["pre"]["locality"][
        "neighborhood_acc"
    ] == [1.0]
    handle.restore()


def test_request_roundtrip():
    r = EditRequest("a b", "a", "c", rephrase=["x a"], locality={"n": [("p", "q")]}, case_id=4)
    assert EditRequest.from_dict(r.to_dict()) == r
