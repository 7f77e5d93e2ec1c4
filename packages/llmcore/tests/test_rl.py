"""llmcore.rl: CPU GRPO config, safe rewards, pass-rate prefilter, verl parquet, real GRPO steps."""

from __future__ import annotations

import logging
import os
import sys

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything here is local
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
pytest.importorskip("trl")

from llmcore import rl
from llmcore.errors import ConfigError, DataError, MissingExtraError


@pytest.fixture(scope="module")
def tiny_lm():
    """A 2-layer, hidden-32 Llama and a BPE tokenizer trained on synthetic sums (built in code)."""
    from tinymodels import random_llama, sums_corpus, toy_tokenizer

    tok = toy_tokenizer(sums_corpus())
    return random_llama(tok, hidden=32, max_positions=128).train(), tok


def _prompts():
    from datasets import Dataset

    return Dataset.from_dict({"prompt": [f"what is {i} plus 1?" for i in range(8)]})


def digit_fraction(prompts, completions, **kwargs):
    """Share of digit characters: varies across completions, so GRPO advantages are non-zero."""
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]


# ---------------------------------------------------------------- cpu_grpo_config


def test_cpu_grpo_config_defaults(tmp_path):
    cfg = rl.cpu_grpo_config()
    assert cfg.use_cpu and not cfg.bf16 and not cfg.fp16
    assert cfg.report_to == [] and cfg.save_strategy == "no"
    assert os.path.isdir(cfg.output_dir)
    assert cfg.generation_batch_size % cfg.num_generations == 0
    cfg = rl.cpu_grpo_config(tmp_path / "out", max_completion_length=8, learning_rate=1e-3)
    assert cfg.output_dir == str(tmp_path / "out") and cfg.max_completion_length == 8


@pytest.mark.parametrize(
    "kw",
    [
        {"per_device_train_batch_size": 4, "num_generations": 4},
        {"per_device_train_batch_size": 4, "num_generations": 3},
        {"per_device_train_batch_size": 2, "num_generations": 4},
        {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 2, "num_generations": 4},
        {"per_device_train_batch_size": 3, "gradient_accumulation_steps": 2, "num_generations": 2},
        {"per_device_train_batch_size": 2, "steps_per_generation": 3, "num_generations": 4},
        {"per_device_train_batch_size": 2, "steps_per_generation": 2, "num_generations": 4},
        {"per_device_train_batch_size": 2, "generation_batch_size": 6, "num_generations": 3},
        {"per_device_train_batch_size": 4, "generation_batch_size": 6, "num_generations": 2},
        {"per_device_train_batch_size": 2, "generation_batch_size": 8, "num_generations": 8},
        {"num_generations": 1},
        {"generation_batch_size": 8, "steps_per_generation": 2},
    ],
)
def test_batch_rule_matches_trl(kw, tmp_path):
    """Our check rejects exactly what trl rejects, but first and with a ConfigError."""
    import trl

    base = {**rl.CPU_GRPO_DEFAULTS, **kw}
    try:
        trl.GRPOConfig(output_dir=str(tmp_path), **base)
        trl_ok = True
    except ValueError:
        trl_ok = False
    if trl_ok:
        assert rl.cpu_grpo_config(tmp_path, **kw).num_generations == base["num_generations"]
    else:
        with pytest.raises(ConfigError, match=r"num_generations|generation_batch_size"):
            rl.cpu_grpo_config(tmp_path, **kw)


def test_cpu_grpo_config_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"num_generations=3 does not divide.*4 \* 1 \* 1 = 4"):
        rl.cpu_grpo_config(tmp_path, num_generations=3)
    for flag in ("bf16", "fp16"):
        with pytest.raises(ConfigError, match=f"{flag}=True"):
            rl.cpu_grpo_config(tmp_path, **{flag: True})
    with pytest.raises(ConfigError, match="use_cpu=False"):
        rl.cpu_grpo_config(tmp_path, use_cpu=False)
    with pytest.raises(ConfigError, match="num_generation"):  # typo gets a suggestion
        rl.cpu_grpo_config(tmp_path, num_generation=4)
    with pytest.raises(ConfigError, match="eval"):
        rl.cpu_grpo_config(tmp_path, eval_strategy="steps", per_device_eval_batch_size=3)


def test_missing_trl_raises_missing_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "trl", None)  # makes `import trl` raise ImportError
    with pytest.raises(MissingExtraError, match=r"icml26-llmcore\[trl\]"):
        rl.cpu_grpo_config()


# ---------------------------------------------------------------- safe_reward


def test_safe_reward_passthrough_and_name():
    wrapped = rl.safe_reward(digit_fraction)
    assert wrapped.__name__ == "digit_fraction"
    assert wrapped(prompts=["p", "q"], completions=["a1", "bb"]) == [0.5, 0.0]
    assert wrapped.errors == 0 and wrapped.last_error is None and wrapped.calls == 1


def test_safe_reward_scores_failing_completion_zero(caplog):
    seen = []

    def exact(prompts, completions, answer, trainer_state=None, **kwargs):
        seen.append((list(answer), trainer_state))
        return [1.0 if int(c) == a else 0.5 for c, a in zip(completions, answer, strict=True)]

    wrapped = rl.safe_reward(exact)
    with caplog.at_level(logging.WARNING, logger="llmcore.rl"):
        out = wrapped(["p"] * 3, ["3", "oops", "7"], answer=[3, 4, 5], trainer_state="S")
        out2 = wrapped(["p"], ["x"], answer=[1], trainer_state="S")
    assert out == [1.0, 0.0, 0.5] and out2 == [0.0]
    assert wrapped.errors == 2
    assert wrapped.last_error.startswith("ValueError") and "'x'" in wrapped.last_error
    # per-completion retries get their own slice of list kwargs, other kwargs unchanged
    assert seen[1:4] == [([3], "S"), ([4], "S"), ([5], "S")]
    assert sum("raised" in r.message for r in caplog.records) == 1  # warned once


def test_safe_reward_batch_only_failure_not_counted():
    def vectorised(prompts, completions, **kwargs):
        if len(completions) > 1:
            raise RuntimeError("batch path broken")
        return [1.0]

    wrapped = rl.safe_reward(vectorised)
    assert wrapped(["p", "q"], ["a", "b"]) == [1.0, 1.0]
    assert wrapped.errors == 0 and "batch path broken" in wrapped.last_error


# ---------------------------------------------------------------- pass_rate_prefilter


def test_pass_rate_prefilter():
    # prompt i is solved by the first i of 4 samples
    prompts = [0, 1, 2, 3, 4]

    def sample(p, k):
        return ["right" if j < p else "wrong" for j in range(k)]

    def grade(p, completion):
        return completion == "right"

    res = rl.pass_rate_prefilter(prompts, sample, grade, k=4)
    assert res.rates == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert res.kept == [1, 2, 3] and res.kept_indices == [1, 2, 3]
    assert res.kept_rates == [0.25, 0.5, 0.75]
    assert res.n_always_solved == 1 and res.n_never_solved == 1
    assert rl.pass_rate_prefilter(prompts, sample, grade, k=4, high=0.6).kept == [1, 2]
    assert rl.pass_rate_prefilter(prompts, sample, grade, k=4) == res  # deterministic
    with pytest.raises(DataError, match="expected k=4"):
        rl.pass_rate_prefilter(prompts, lambda p, k: ["x"], grade, k=4)
    with pytest.raises(ConfigError, match="k=0"):
        rl.pass_rate_prefilter(prompts, sample, grade, k=0)


# ---------------------------------------------------------------- write_verl_parquet


def test_write_verl_parquet(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [
        {"prompt": "1+1?", "answer": 2},
        {
            "prompt": [{"role": "user", "content": "2+2?"}],
            "answer": "4",
            "extra_info": {"question": "2+2?"},
        },
    ]
    path = rl.write_verl_parquet(
        rows, tmp_path / "d" / "train.parquet", data_source="toy/sum", system_prompt="Be brief."
    )
    table = pq.read_table(path)
    assert set(table.column_names) == {
        "data_source",
        "prompt",
        "ability",
        "reward_model",
        "extra_info",
    }
    got = table.to_pylist()
    assert got[0]["data_source"] == "toy/sum" and got[0]["ability"] == "math"
    assert got[0]["prompt"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "1+1?"},
    ]
    assert got[1]["prompt"] == [{"role": "user", "content": "2+2?"}]
    assert got[0]["reward_model"] == {"style": "rule", "ground_truth": "2"}
    assert got[0]["extra_info"]["split"] == "train" and got[0]["extra_info"]["index"] == 0
    assert got[1]["extra_info"]["index"] == 1 and got[1]["extra_info"]["question"] == "2+2?"
    assert sorted(p.name for p in path.parent.iterdir()) == ["train.parquet"]  # no temp left

    before = path.read_bytes()
    with pytest.raises(DataError, match="row 1 has no 'answer'"):
        rl.write_verl_parquet([rows[0], {"prompt": "x"}], path, data_source="toy/sum")
    assert path.read_bytes() == before  # a failed write leaves the old file intact


# ---------------------------------------------------------------- real GRPO on CPU


def test_grpo_two_steps_on_cpu(tiny_lm, tmp_path):
    import torch
    import trl

    model, tok = tiny_lm
    before = {k: v.clone() for k, v in model.state_dict().items()}
    reward = rl.safe_reward(digit_fraction)
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=rl.cpu_grpo_config(tmp_path, max_steps=2),
        train_dataset=_prompts(),
        processing_class=tok,
    )
    trainer.train()
    assert trainer.state.global_step == 2
    assert reward.calls == 2 and reward.errors == 0
    assert any("rewards/digit_fraction/mean" in h for h in trainer.state.log_history)
    changed = [k for k, v in model.state_dict().items() if not torch.equal(before[k], v)]
    assert changed, "GRPO steps left every parameter unchanged"
    assert not any(tmp_path.glob("checkpoint-*"))  # save_strategy="no"


def test_two_trainers_in_one_process(tiny_lm, tmp_path):
    """Trainers with different accelerate settings in one process: fp32, then bf16 (accelerate
    1.x re-initialises its state for a changed mixed precision), then fp32 after an explicit
    reset_accelerate_state()."""
    import trl
    from accelerate.state import AcceleratorState, PartialState

    model, tok = tiny_lm

    def train_one(args):
        trainer = trl.GRPOTrainer(
            model=model,
            reward_funcs=[digit_fraction],
            args=args,
            train_dataset=_prompts(),
            processing_class=tok,
        )
        trainer.train()
        assert trainer.state.global_step == 1
        return trainer.accelerator.mixed_precision

    assert train_one(rl.cpu_grpo_config(tmp_path / "a", max_steps=1)) == "no"
    bf16 = {**rl.CPU_GRPO_DEFAULTS, "bf16": True, "max_steps": 1}
    assert train_one(trl.GRPOConfig(output_dir=str(tmp_path / "b"), **bf16)) == "bf16"

    rl.reset_accelerate_state()
    assert not AcceleratorState._shared_state and not PartialState._shared_state
    assert train_one(rl.cpu_grpo_config(tmp_path / "c", max_steps=1)) == "no"
    rl.reset_accelerate_state()


def test_reset_with_args_keeps_accelerate_logging_usable(tmp_path):
    """A trainer's constructor may log through accelerate before it builds its Accelerator
    (trl warns about some loss settings there); after a plain reset that raises, so the reset
    can re-run the device set-up of arguments built before it."""
    from accelerate.logging import get_logger
    from accelerate.state import PartialState

    log = get_logger("llmcore-test")
    args = rl.cpu_grpo_config(tmp_path / "a", max_steps=1)
    rl.reset_accelerate_state()
    with pytest.raises(RuntimeError, match="initialize the accelerate state"):
        log.warning("no process state")
    rl.reset_accelerate_state(args)
    assert PartialState._shared_state and args.device.type == "cpu"
    log.warning("logged")  # does not raise
    with pytest.raises(ConfigError, match="TrainingArguments"):
        rl.reset_accelerate_state(object())
    rl.reset_accelerate_state()
