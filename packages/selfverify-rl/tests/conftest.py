"""Shared test setup: one torch thread; the warm-up and evaluation-set fixtures; a small trainer.

Several GRPO trainers run in this one process (smoke tests, the demo, the CLI test, the arms of
the extended tests): each is created right after ``llmcore.rl.reset_accelerate_state()``
(accelerate's ``AcceleratorState._reset_state(True)``), so accelerate's process-wide state never
leaks from one trainer to the next. In llmcore's fixture phase every fixture builds in its own
worker process.
"""

from __future__ import annotations

import pytest
import torch

from llmcore.zoo import pin_reference_kernels

# The CPU kernels the fixtures were calibrated with (nox sets them too); before any tensor op.
pin_reference_kernels()
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_tok():
    """A byte-level tokenizer (one token per character, with a chat template)."""
    from selfverify_rl.warmup import WarmupSpec, warmup_corpus

    from llmcore.zoo.tokenizer import train_bpe_tokenizer

    return train_bpe_tokenizer(warmup_corpus(WarmupSpec(n_docs=200)), 264)


@pytest.fixture(scope="session")
def warm_entry():
    """The warm-up checkpoint fixture (built once per machine, then loaded from the zoo)."""
    from selfverify_rl.experiments import build_warmup

    return build_warmup()


@pytest.fixture(scope="session")
def evalset_entry(warm_entry):
    from selfverify_rl.experiments import build_evalset

    return build_evalset()


def small_trainer(
    entry, mode: str, steps: int, *, interval: int = 1, seed: int = 0, peft_config=None, **kw
):
    """A fresh trainer on the warm-up model: 4 prompts x 4 generations, 48 new tokens
    (``peft_config`` goes to the trainer, ``kw`` to the config)."""
    from selfverify_rl.evaluate import model_prefix
    from selfverify_rl.tasks import ArithmeticTask
    from selfverify_rl.trainer import SelfVerifyGRPOTrainer, cpu_config, make_train_dataset

    from llmcore.rl import reset_accelerate_state

    model, tok = entry.load()
    rows = ArithmeticTask(digits=2, seed=3).problems(16)
    cfg = cpu_config(
        mode=mode, max_steps=steps, num_generations=4, per_device_train_batch_size=16,
        max_completion_length=48, loss_type="dapo",
        verification_interval=interval, seed=seed, **{"learning_rate": 5e-5, "beta": 0.0, **kw},
    )  # fmt: skip
    reset_accelerate_state()
    return SelfVerifyGRPOTrainer(
        model=model, args=cfg, processing_class=tok,
        train_dataset=make_train_dataset(rows, prefix=model_prefix(tok)), peft_config=peft_config,
    )  # fmt: skip
