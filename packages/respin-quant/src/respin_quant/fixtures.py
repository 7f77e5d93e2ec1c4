"""Default-tier test fixtures, registered for llmcore's fixture phase (``llmcore zoo build
--fixtures``), which builds every package's fixtures before the tests run."""

from __future__ import annotations

from llmcore.fixtures import Built, Fixture


def build_markov() -> Built:
    """The tiny Markov Llama with injected outliers (:func:`respin_quant.tiny.build_tiny`)."""
    from respin_quant.tiny import TinySpec, _cache_dir, build_tiny

    cached = (_cache_dir(TinySpec()) / "respin_tiny.json").exists()
    return Built(from_cache=cached, path=str(build_tiny()))


FIXTURES = [
    Fixture(
        name="respin-quant-markov",
        build="respin_quant.fixtures:build_markov",
        # Measured 2026-12-01 from an empty cache, one thread: 198 s CPU (196 user + 2 sys);
        # 379 s wall on a 2-core machine shared with three other training jobs (52 % CPU).
        cold_seconds=198.0,
        entries=("tiny-markov",),
        description="tiny Llama trained on a Markov source, outliers injected at load",
    ),
]
