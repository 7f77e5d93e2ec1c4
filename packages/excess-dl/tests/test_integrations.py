"""End to end: the CLI on JSONL files, the TRL callback, lm-eval task files, datasets input."""

from __future__ import annotations

import json
import math
import random

import pytest
from excess_dl import EDLConfig, compute_edl


@pytest.fixture(scope="module")
def saved_tiny(tiny, tmp_path_factory):
    model, tok = tiny
    path = tmp_path_factory.mktemp("tiny")
    model.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def jsonl_files(suite, tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    train = suite.task_examples("teach", 8, random.Random(0))
    test = suite.test_examples("teach")[:8]
    for name, rows in (("train", train), ("test", test)):
        (d / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d / "train.jsonl", d / "test.jsonl"


@pytest.mark.parametrize(
    "method_args",
    [
        ["--method", "full"],
        ["--method", "lora", "--lora-r", "2", "--lora-targets", "q_proj,v_proj"],
        ["--method", "random-params", "--random-k", "50"],
    ],
)
def test_cli_compute_end_to_end(saved_tiny, jsonl_files, tmp_path, method_args):
    from excess_dl.cli import main

    out = tmp_path / "curve.json"
    train, test = jsonl_files
    rc = main(
        [
            "compute",
            "--model",
            str(saved_tiny),
            "--train",
            str(train),
            "--test",
            str(test),
            "--checkpoints",
            "2,4,8",
            "--out",
            str(out),
            *method_args,
        ]
    )
    assert rc == 0
    d = json.loads(out.read_text())
    assert [p["n"] for p in d["points"]] == [2, 4, 8]
    assert d["trainable_params"] > 0
    assert len(d["per_example_bits"]) == 8
    for p in d["points"]:
        assert math.isfinite(p["edl_bits"])
        assert p["edl_bits"] == pytest.approx(p["mdl_bits"] - p["n"] * p["test_bits_per_example"])


def test_cli_sweep_resumes_and_reports(saved_tiny, jsonl_files, tmp_path, capsys):
    from excess_dl.cli import main

    train, test = jsonl_files
    out = tmp_path / "sweep.jsonl"
    args = [
        "sweep",
        "--model",
        str(saved_tiny),
        "--train-pool",
        str(train),
        "--test",
        str(test),
        "--ns",
        "1,2,4,8",
        "--methods",
        "full,prompt",
        "--task",
        "teach",
        "--out",
        str(out),
        "--no-accuracy",
    ]
    assert main(args) == 0
    assert len(out.read_text().splitlines()) == 2
    assert main(args) == 0  # resumed: nothing recomputed
    assert len(out.read_text().splitlines()) == 2
    assert "skip teach|full|8" in capsys.readouterr().out
    assert main(["report", str(out), "--targets", "0.1,0.5"]) == 0
    assert "B(0.1)" in capsys.readouterr().out
    assert main(["capacity", str(out)]) == 0
    assert "C_bits" in capsys.readouterr().out


def test_cli_bad_input_is_one_line_error(saved_tiny, tmp_path, capsys):
    from excess_dl.cli import main

    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    rc = main(["compute", "--model", str(saved_tiny), "--train", str(empty), "--test", str(empty)])
    assert rc == 2
    assert "empty" in capsys.readouterr().err


def test_trl_callback_equals_single_pass(tiny, suite):
    """SFTTrainer's first epoch, coded by the callback, equals mode='single_pass' to 1e-4 bits
    (same order, constant lr, completion-only loss, EOS appended, no BOS as TRL tokenises)."""
    pytest.importorskip("trl")
    import trl
    from datasets import Dataset
    from excess_dl.integrations.trl import PrequentialCallback, edl_sft_config

    model, tok = tiny
    rows = [
        {"prompt": r["prompt"], "completion": " " + r["completion"]}
        for r in suite.task_examples("teach", 8, random.Random(0))
    ]
    cb = PrequentialCallback()
    import copy

    trainer = trl.SFTTrainer(
        model=copy.deepcopy(model),
        args=edl_sft_config(per_device_train_batch_size=4, learning_rate=1e-3),
        train_dataset=Dataset.from_list(rows),
        processing_class=tok,
        callbacks=[cb],
    )
    trainer.train()
    cfg = EDLConfig(
        mode="single_pass", batch_size=4, add_eos=True, add_bos=False, accuracy=False, lr=1e-3
    )
    curve = compute_edl(model, rows, suite.test_examples("teach")[:4], cfg, tok)
    assert len(cb.per_example_bits) == 8
    diffs = [abs(a - b) for a, b in zip(cb.per_example_bits, curve.per_example_bits, strict=True)]
    assert max(diffs) <= 1e-4, diffs
    assert cb.mdl_bits == pytest.approx(curve.points[-1].mdl_bits, abs=1e-3)


def test_trl_callback_refuses_grad_accumulation(tiny, suite):
    pytest.importorskip("trl")
    import trl
    from datasets import Dataset
    from excess_dl.errors import EDLConfigError
    from excess_dl.integrations.trl import PrequentialCallback, edl_sft_config

    model, tok = tiny
    rows = [{"prompt": "a b c d =", "completion": " a b c d ."}] * 4
    import copy

    trainer = trl.SFTTrainer(
        model=copy.deepcopy(model),
        args=edl_sft_config(per_device_train_batch_size=2, gradient_accumulation_steps=2),
        train_dataset=Dataset.from_list(rows),
        processing_class=tok,
        callbacks=[PrequentialCallback()],
    )
    with pytest.raises(EDLConfigError, match="gradient_accumulation_steps"):
        trainer.train()


def test_datasets_and_conversational_rows(tiny, suite):
    """A datasets.Dataset is accepted; a conversational row codes its assistant turn only,
    through the chat template."""
    from datasets import Dataset
    from excess_dl import code_lengths

    model, tok = tiny
    rows = suite.task_examples("elicit", 4, random.Random(1))
    assert code_lengths(model, tok, Dataset.from_list(rows)) == pytest.approx(
        code_lengths(model, tok, rows), abs=1e-6
    )
    msgs = [{"role": "user", "content": "a b c d ="}, {"role": "assistant", "content": "e f g h ."}]
    ctx = tok.apply_chat_template(msgs[:1], tokenize=False, add_generation_prompt=True)
    full = tok.apply_chat_template(msgs, tokenize=False)
    (conv,) = code_lengths(model, tok, [{"messages": msgs}])
    (pc,) = code_lengths(model, tok, [(ctx, full[len(ctx) :])])
    assert conv == pytest.approx(pc, abs=1e-6)


def test_lmeval_toy_tasks(tmp_path, suite):
    pytest.importorskip("lm_eval")
    import yaml
    from excess_dl.toy import write_lmeval_tasks

    paths = write_lmeval_tasks(tmp_path, suite)
    names = sorted(p.stem for p in paths if p.suffix == ".yaml")
    assert names == ["edl_cipher_elicit", "edl_cipher_teach", "edl_table"]
    cfg = yaml.safe_load((tmp_path / "edl_table.yaml").read_text())
    assert cfg["output_type"] == "generate_until"
