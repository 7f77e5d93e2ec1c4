"""The tiny target model of the CPU checks: a word-level Llama (4 layers x 128) pre-trained on
packed windows of synthetic chain-of-thought prompts (:mod:`cds_icl.synthetic`)."""

from __future__ import annotations

from typing import Any

TINY_STEPS = 150
TINY_DOCS = 3000
MAX_POSITIONS = 768
"""Covers a 16-shot prompt (about 600 tokens) plus the generated solution."""
WINDOW = 256
DEMO_STEPS = 24
"""The demo-size variant (when the test fixture is not cached): it learns the layout only."""


def recipe(steps: int = TINY_STEPS, n_docs: int = TINY_DOCS) -> Any:
    """The zoo recipe ``cds-icl-tiny-<steps>``."""
    from cds_icl.synthetic import training_docs, vocabulary
    from llmcore import zoo

    corpus = zoo.Corpus.from_texts("cds-synth-cot", training_docs(n_docs), eval_fraction=0.03)
    return zoo.Recipe(
        f"cds-icl-tiny-{steps}",
        corpus,
        tokenizer=zoo.TokenizerSpec(kind="word", symbols=tuple(vocabulary())),
        model=zoo.ModelSpec(max_position_embeddings=MAX_POSITIONS),
        train=zoo.TrainSpec(
            steps=steps,
            batch_size=8,
            lr=3e-3,
            warmup_steps=min(20, steps // 4),
            max_length=WINDOW,
            packing=True,
        ),
        max_eval_loss=1.2 if steps >= TINY_STEPS else 4.0,
    )


def build_tiny(steps: int = TINY_STEPS, progress: bool = True) -> Any:
    """Build (or load from the zoo cache) the tiny target model; returns the ``ZooEntry``.
    The recipe's key covers the corpus text, so a change of the generator rebuilds it."""
    from llmcore import zoo

    return zoo.build(recipe(steps), progress=progress)
