"""The SFTTrainer warm-up for hub models and the lm-eval tasks, on the tiny warm-up checkpoint."""

from __future__ import annotations

import math

import pytest


def test_warmup_pairs_reproduce_the_corpus():
    """Plain-style pairs are the tiny warm-up's documents split at the prompt's newline."""
    from selfverify_rl.sft import warmup_pairs
    from selfverify_rl.warmup import WarmupSpec, warmup_corpus

    spec = WarmupSpec(n_docs=300)
    pairs = warmup_pairs(spec)
    docs = warmup_corpus(spec)
    assert [p["prompt"] + p["completion"] for p in pairs] == docs
    assert all(p["prompt"].endswith("\n") and "\n" not in p["completion"] for p in pairs)
    assert {p["prompt"].split(" ")[0] for p in pairs} == {"Solve", "Check"}


def test_sft_warmup_rejects_bad_input(warm_entry):
    from selfverify_rl.errors import SelfVerifyConfigError, SelfVerifyDataError
    from selfverify_rl.sft import sft_warmup

    model, tok = warm_entry.load()
    with pytest.raises(SelfVerifyDataError, match="no pairs"):
        sft_warmup(model, tok, [])
    with pytest.raises(SelfVerifyDataError, match="completion"):
        sft_warmup(model, tok, [{"prompt": "Solve 1+2. Box the answer.\n", "completion": ""}])
    with pytest.raises(SelfVerifyConfigError, match="bf16"):
        sft_warmup(model, tok, [{"prompt": "a", "completion": "b"}], bf16=True, use_cpu=True)


@pytest.mark.slow
def test_sft_warmup_two_steps_on_tiny_model(warm_entry, tmp_path):
    """Two real SFTTrainer steps (completion-only loss) change the weights; loss is finite."""
    import torch
    from selfverify_rl.sft import sft_warmup, warmup_pairs
    from selfverify_rl.warmup import WarmupSpec

    torch.manual_seed(0)
    model, tok = warm_entry.load()
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    pairs = warmup_pairs(WarmupSpec(n_docs=32))
    tr = sft_warmup(model, tok, pairs, output_dir=str(tmp_path), max_steps=2, batch_size=4,
                    learning_rate=1e-3, max_length=128)  # fmt: skip
    losses = [h["loss"] for h in tr.state.log_history if "loss" in h]
    assert len(losses) == 2 and all(math.isfinite(x) and x > 0 for x in losses)
    assert tr.completion_only_loss
    changed = [k for k, v in tr.model.named_parameters() if not torch.equal(v, before[k])]
    assert changed


@pytest.mark.slow
def test_lmeval_tasks_match_our_evaluation(warm_entry, evalset_entry, tmp_path):
    """lm-eval's ``selfverify_gen`` / ``selfverify_verify`` on 8 items score what
    :mod:`selfverify_rl.evaluate` scores on the same items (greedy both ways)."""
    pytest.importorskip("lm_eval")
    from selfverify_rl.evaluate import generation_accuracy, verification_metrics
    from selfverify_rl.experiments import load_evalset
    from selfverify_rl.lmeval_tasks import write_tasks

    from llmcore import lmeval

    problems, samples = load_evalset(evalset_entry)
    problems, samples = problems[:8], samples[:4] + samples[-4:]
    cands = [{"question": s.question, "candidate": s.candidate, "label": s.label} for s in samples]
    model, tok = warm_entry.load()
    write_tasks(problems, cands, tmp_path / "tasks", tokenizer=tok)
    out = lmeval.evaluate_model(model, tok, ["selfverify_gen", "selfverify_verify"],
                                include_path=tmp_path / "tasks", bootstrap_iters=0)  # fmt: skip
    got = lmeval.scores(out)
    ours_g = generation_accuracy(model, tok, problems)["acc"]
    ours_v = verification_metrics(model, tok, samples)
    assert got["selfverify_gen"]["acc"] == pytest.approx(ours_g)
    assert got["selfverify_verify"]["acc"] == pytest.approx(ours_v["acc"])
    assert got["selfverify_verify"]["yes_rate"] == pytest.approx(ours_v["yes_rate"])


def test_lmeval_tasks_reject_bad_candidates(tmp_path):
    from selfverify_rl.errors import SelfVerifyDataError
    from selfverify_rl.lmeval_tasks import write_tasks

    probs = [{"problem_id": "1+2", "question": "1+2", "answer": "3"}]
    with pytest.raises(SelfVerifyDataError, match="label"):
        write_tasks(probs, [{"question": "1+2", "candidate": "3", "label": "yes"}], tmp_path)
