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


def test_config_file_then_flags(tmp_path, capsys):
    """``--config FILE`` sets ViaSDConfig fields, typed flags override it (also the HF alias
    and ``--alphas``); a bad file is a usage error (exit 2) naming the key; torch-free."""
    from via_sd import cli

    f = tmp_path / "via.yaml"
    f.write_text("gamma: 3\ntau_accept: 0.9\ntau_escalate: 0.2\nmax_new_tokens: 7\n")
    base = ["generate", "--target", "t", "--drafter", "d", "--prompt", "x", "--config", str(f)]
    cfg = cli._config(cli.build_parser().parse_args(base))
    assert (cfg.gamma, cfg.tau_accept, cfg.tau_escalate, cfg.max_new_tokens) == (3, 0.9, 0.2, 7)
    cfg = cli._config(
        cli.build_parser().parse_args(
            [*base, "--num-assistant-tokens", "4", "--alphas", "0.5,0.3", "--no-bonus-token"]
        )
    )
    assert (cfg.gamma, cfg.tau_accept, cfg.tau_escalate, cfg.bonus_token) == (4, 0.7, 0.5, False)
    assert cfg.max_new_tokens == 7
    f.write_text("gama: 3\n")
    assert main(base) == 2
    err = capsys.readouterr().err
    assert err.startswith("via-sd: error:") and "gama" in err and "gamma" in err
    f.write_text("tau_accept: 0.3\n")  # below tau_escalate's default 0.5: ViaSDConfigError
    assert main(base) == 2
    assert "tau_escalate" in capsys.readouterr().err


def test_package_errors_are_llmcore_errors():
    from via_sd import errors

    from llmcore.errors import LLMCoreError

    for name in ("ViaSDConfigError", "ViaSDInputError", "ViaSDTypeError"):
        assert issubclass(getattr(errors, name), LLMCoreError)
    assert issubclass(errors.UnsupportedModelError, NotImplementedError)
    assert issubclass(errors.ViaSDConfigError, ValueError)


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


def test_lm_eval_model_without_lm_eval_names_the_extra():
    code = (
        "import sys\nsys.modules['lm_eval'] = None\n"
        "from llmcore.errors import MissingExtraError\n"
        "try:\n    import via_sd.lm_eval_model\nexcept MissingExtraError as e:\n"
        "    print(e)\nelse:\n    raise SystemExit('imported without lm-eval')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert "pip install 'via-sd[lm-eval]'" in out.stdout


def test_lm_eval_registration():
    import via_sd.lm_eval_model  # noqa: F401
    from lm_eval.api.registry import get_model

    assert get_model("via-sd").__name__ == "ViaSDLM"


def test_lm_eval_generate_until_runs_via_sd(tiny_dir):
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


def test_lm_eval_task_scores_via_sd_outputs(tiny_dir, tmp_path):
    """End to end through lm-eval: a local ``generate_until`` task (two held-out list prompts,
    written with ``llmcore.lmeval.write_generate_until_task``) evaluated by ``simple_evaluate``
    on the ``via-sd`` model. Its exact match must equal the one of the same VIA-SD decode run
    through the Python API, and the model's decode statistics must show VIA-SD ran."""
    import lm_eval
    from lm_eval.tasks import TaskManager
    from via_sd import SlimVerifier, ViaSDConfig, via_sd_generate
    from via_sd.bench import encode_prompt
    from via_sd.lm_eval_model import ViaSDLM
    from via_sd.tiny import eval_prompts, score

    from llmcore import lmeval
    from llmcore.data import write_jsonl

    rows = eval_prompts(2)
    write_jsonl(tmp_path / "lists.jsonl", rows)
    lmeval.write_generate_until_task(
        tmp_path / "tasks",
        task="via_sd_lists",
        data_files=tmp_path / "lists.jsonl",
        doc_to_text="{{prompt}}",
        doc_to_target="{{reference}}",
        generation_kwargs={"max_gen_toks": 40},
    )
    lm = ViaSDLM(
        pretrained=str(tiny_dir / "target"),
        drafter=str(tiny_dir / "drafter"),
        device="cpu",
        batch_size=1,
        dtype="float32",
        add_bos_token=True,
    )
    out = lm_eval.simple_evaluate(
        model=lm,
        tasks=["via_sd_lists"],
        task_manager=TaskManager(include_path=str(tmp_path / "tasks"), include_defaults=False),
        bootstrap_iters=0,
    )
    em = lmeval.scores(out)["via_sd_lists"]["exact_match"]
    slim = SlimVerifier(lm.model, skip_ratio=0.45)
    cfg = ViaSDConfig(max_new_tokens=40, eos_token_id=lm.tokenizer.eos_token_id)
    direct = [
        score(
            lm.tokenizer.decode(
                via_sd_generate(
                    lm.model, lm.drafter, slim, encode_prompt(lm.tokenizer, r["prompt"]), cfg
                ).new_tokens,
                skip_special_tokens=True,
            ),
            r["reference"],
        )
        for r in rows
    ]
    print(f"\nlm-eval exact match {em}; direct VIA-SD {direct}; stats {lm.via_stats}")
    assert em == sum(direct) / len(direct)
    assert lm.via_stats["target_forwards"] > 0 and lm.via_stats["tokens"] > 0
    assert (
        lm.via_stats["tier_a"] + lm.via_stats["tier_b"] + lm.via_stats["tier_c"]
        == (lm.via_stats["drafted"])
    )
