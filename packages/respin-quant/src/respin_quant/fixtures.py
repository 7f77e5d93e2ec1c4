"""Default-tier test fixtures, registered for llmcore's fixture phase (``llmcore zoo build
--fixtures``), which builds every package's fixtures before the tests run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmcore.fixtures import Fixture

if TYPE_CHECKING:
    from llmcore.zoo import ZooEntry


def build_markov() -> ZooEntry:
    """The tiny Markov Llama (:func:`respin_quant.tiny.build_tiny_entry`; outliers are injected
    at load time, so this one entry serves every outlier scale)."""
    from respin_quant.tiny import build_tiny_entry

    return build_tiny_entry()


FIXTURES = [
    Fixture(
        name="respin-quant-markov",
        build="respin_quant.fixtures:build_markov",
        # Measured 2026-12-01 from an empty cache, one thread: 282 s CPU (278.7 user + 3.7 sys);
        # 1424 s wall on a 2-core machine shared with about eight other jobs (19 % CPU).
        cold_seconds=282.0,
        entries=("respin-tiny-markov",),
        description="tiny Llama trained on a Markov source, outliers injected at load",
    ),
]
