"""Default-tier fixtures: the few-step smoke learners of the ``train`` → ``eval-kl`` tests.

The claim trains nothing (it uses the add-α oracle-state learner), so these are the only
fixtures. ``cold_seconds`` are one-thread cold builds measured on this project's shared 2-core
machine (see the README).
"""

from __future__ import annotations

from typing import Any

from llmcore.fixtures import Fixture

SMOKE_STEPS = 30


def smoke_corpus() -> tuple[Any, Any]:
    """The smoke corpus: 400 natural strings of ``PFA.random(seed=0)``."""
    from pfa_learnability.pfa import PFA
    from pfa_learnability.sampling import sample_corpus

    pfa = PFA.random(seed=0)
    return pfa, sample_corpus(pfa, "sym:a", n=400, seed=0)


def build_smoke_llama() -> Any:
    from llmcore import zoo
    from pfa_learnability.neural import llama_recipe

    pfa, corpus = smoke_corpus()
    recipe = llama_recipe(
        "pfa-learnability-smoke-llama", corpus.strings(), pfa.alphabet, d_model=32,
        n_layers=1, n_heads=2, steps=SMOKE_STEPS, batch_size=16,
    )  # fmt: skip
    return zoo.build(recipe, progress=False)


def build_smoke_lstm() -> Any:
    from pfa_learnability.neural import lstm_entry

    pfa, corpus = smoke_corpus()
    return lstm_entry(
        "pfa-learnability-smoke-lstm", corpus.strings(), pfa.alphabet, d_model=32, n_layers=1,
        steps=SMOKE_STEPS, batch_size=16,
    )  # fmt: skip


def build_smoke_models() -> list[Any]:
    """Both smoke learners in one worker (one torch/transformers import)."""
    return [build_smoke_llama(), build_smoke_lstm()]


FIXTURES = [
    Fixture(
        name="pfa-learnability-smoke",
        build="pfa_learnability.fixtures:build_smoke_models",
        cold_seconds=46.0,
        entries=("pfa-learnability-smoke-llama", "pfa-learnability-smoke-lstm"),
        description="1-layer d=32 Llama and LSTM, 30 steps each on 400 PFA strings "
        "(train -> eval-kl smoke)",
    ),
]
