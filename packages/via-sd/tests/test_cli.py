"""CLI: every subcommand on the tiny fixtures; --help does not import torch."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from via_sd.cli import main


def test_help_does_not_import_torch():
    code = (
        "import sys\nfrom via_sd.cli import build_parser\n"
        "try:\n    build_parser().parse_args(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
        "import via_sd\nassert 'torch' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_theory(tmp_path, capsys):
    out = tmp_path / "t.json"
    assert (
        main(
            [
                "theory",
                "--alpha",
                "0.8",
                "--gamma",
                "5",
                "--c",
                "0.1",
                "--tiers",
                "0.5,0.2,0.3",
                "--kappa-c",
                "0.6",
                "--json-out",
                str(out),
            ]
        )
        == 0
    )
    d = json.loads(out.read_text())
    assert d["sd_speedup"] == pytest.approx(2.45952, abs=1e-5)
    assert d["via"]["speedup"] > 0
    v = d["via"]
    assert v["break_even_c_s"] == v["p_no_target"]
    assert (v["vs_sd_block_cost"] < 1) == (d["c_s"] < v["p_no_target"])
    assert main(["theory", "--alpha", "2", "--c", "0.1"]) == 2
    assert "alpha" in capsys.readouterr().err


@pytest.fixture(scope="module")
def tiny_dir(fx, tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    assert main(["make-tiny", "--out", str(d)]) == 0
    return d


def test_generate_search_bench(tiny_dir, tmp_path, capsys):
    t, p = str(tiny_dir / "target"), str(tiny_dir / "drafter")
    out = tmp_path / "g.json"
    assert (
        main(
            [
                "generate",
                "--target",
                t,
                "--drafter",
                p,
                "--prompt",
                "Q:40213|",
                "--alphas",
                "0.5,0.3",
                "--max-new-tokens",
                "30",
                "--json-out",
                str(out),
            ]
        )
        == 0
    )
    g = json.loads(out.read_text())
    assert g["output"].startswith("R:") and g["tokens"] > 0 and g["lossless"] is False
    mask = tmp_path / "mask.json"
    assert (
        main(
            [
                "search-mask",
                "--target",
                t,
                "--calib",
                str(tiny_dir / "calib.jsonl"),
                "--steps",
                "6",
                "--num-calib",
                "4",
                "--out",
                str(mask),
            ]
        )
        == 0
    )
    m = json.loads(mask.read_text())
    assert (
        m["num_layers"] == 8 and len(m["skip_layers"]) == 3 and m["cost"] <= m["baseline_cost_even"]
    )
    res = tmp_path / "bench.jsonl"
    args = [
        "bench",
        "--target",
        t,
        "--drafter",
        p,
        "--prompts",
        str(tiny_dir / "prompts.jsonl"),
        "--limit",
        "2",
        "--repeats",
        "1",
        "--warmup",
        "0",
        "--mask",
        str(mask),
        "--max-new-tokens",
        "40",
        "--out",
        str(res),
    ]
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "via" in table and "hf" in table and "tgt_fwd/sd" in table and "modelled_s" in table
    assert "VIA/SD wall" in table and "c_s =" in table
    rows = [json.loads(x) for x in res.read_text().splitlines()]
    assert {r["method"] for r in rows} == {"ar", "sd", "hf", "via"} and len(rows) == 8
    assert main(args) == 0  # resume: nothing recomputed, same file
    assert len(res.read_text().splitlines()) == 8
    summ = json.loads((tmp_path / "bench.jsonl.summary.json").read_text())
    assert "theory" in summ and summ["latencies"]["c"] > 0
    vs = summ["versus_sd"]
    assert vs["break_even_c_s"] == vs["p_no_target_measured"] and vs["wall_ratio_modelled"] > 0
    assert all(m["modelled_wall_s"] > 0 for m in summ["methods"].values())
    assert all(
        r["draft_tokens_processed"] >= r["draft_forwards"] for r in rows if r["method"] != "ar"
    )
    assert (
        main(
            ["generate", "--target", t, "--drafter", p, "--prompt", "Q:1|", "--skip-layers", "0,1"]
        )
        == 2
    )
    assert "first or last" in capsys.readouterr().err


def test_drafter_kinds_from_cli(tiny_dir, capsys):
    t = str(tiny_dir / "target")
    for d in ("prompt-lookup:2", "early-exit:4"):
        assert (
            main(
                [
                    "generate",
                    "--target",
                    t,
                    "--drafter",
                    d,
                    "--prompt",
                    "Q:40213|",
                    "--method",
                    "sd",
                    "--max-new-tokens",
                    "20",
                ]
            )
            == 0
        )
    assert (
        main(
            [
                "generate",
                "--target",
                t,
                "--drafter",
                "prompt-lookup",
                "--prompt",
                "Q:4|",
                "--temperature",
                "1.0",
            ]
        )
        == 2
    )


def test_registry_and_demo():
    from llmcore.registry import get_method

    m = get_method("via-sd")
    assert m.demo == "via_sd.demo:run"
    from via_sd.demo import run

    d = run(n_prompts=4, print_table=False)
    assert d["via_target_forwards"] < d["ar_target_forwards"]


def test_lm_eval_registration():
    pytest.importorskip("lm_eval")
    import via_sd.lm_eval_model  # noqa: F401
    from lm_eval.api.registry import get_model

    assert get_model("via-sd").__name__ == "ViaSDLM"


def test_lm_eval_generate_until_runs_via_sd(tiny_dir):
    pytest.importorskip("lm_eval")
    pytest.importorskip("accelerate")
    from lm_eval.api.instance import Instance
    from via_sd.lm_eval_model import ViaSDLM

    lm = ViaSDLM(
        pretrained=str(tiny_dir / "target"),
        drafter=str(tiny_dir / "drafter"),
        device="cpu",
        batch_size=1,
        dtype="float32",
    )
    reqs = [
        Instance("generate_until", {}, ("<s>Q:40213|", {"until": ["|S"], "max_gen_toks": 40}), 0),
        Instance("generate_until", {}, ("<s>Q:9911|", {"until": ["."], "max_gen_toks": 40}), 1),
    ]
    out = lm.generate_until(reqs, disable_tqdm=True)
    assert out[0].startswith("R:") and "|S" not in out[0]
    assert lm.via_stats["target_forwards"] > 0 and lm.via_stats["tokens"] > 0
