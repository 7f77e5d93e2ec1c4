"""Shared test setup.

One torch thread. Trainers run in this process one after another: every ``run_sft`` /
``run_grpo`` resets accelerate's process-wide ``AcceleratorState`` just before building its
trainer (``llmcore.rl.reset_accelerate_state(args)``, i.e. ``AcceleratorState._reset_state(True)``
and the trainer config's device set-up run again) and after training, so each trainer starts
clean. The claim arms are cached zoo entries (``compgen-rl-sft``,
``compgen-rl-sft-rl``) built once by the fixture phase (``llmcore zoo build --fixtures
compgen-rl``) or on first use.
"""

from __future__ import annotations

import pytest
import torch

from llmcore.zoo import pin_reference_kernels

# The CPU kernels the fixtures were calibrated with (nox sets them too); before any tensor op.
pin_reference_kernels()
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_model():
    """A random 2-layer Llama over the character-level zoo tokenizer of the tiny task."""
    from compgen_rl.data import SplitConfig, build_rows

    from llmcore import zoo
    from llmcore.zoo.train import build_model

    rows, _ = build_rows(
        SplitConfig.routing_context_cpu(n_sft=200, n_rl=32, n_test=16, n_ood=8, n_probe=1)
    )
    tok = zoo.train_bpe_tokenizer([r["prompt"] + r["completion"] for r in rows["sft"]], 264)
    spec = zoo.ModelSpec(
        hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64, max_position_embeddings=64
    )
    return build_model(spec, tok, seed=0).eval(), tok, rows


@pytest.fixture(scope="session")
def claim_arms():
    """(SFT entry, SFT->RL entry) of the routing-context CPU recipe (cached zoo entries)."""
    from compgen_rl.tiny import build_rl_arm, build_sft

    sft = build_sft()
    return sft, build_rl_arm(sft)
