"""Default-tier test fixtures, registered for llmcore's fixture phase (``llmcore zoo build
--fixtures``), which builds every package's fixtures before the tests run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmcore.fixtures import Fixture

if TYPE_CHECKING:
    from llmcore.zoo import ZooEntry


def build_tiny() -> ZooEntry:
    """The spec-align tiny model's zoo entry (:func:`spec_align.tiny.build_tiny_model`); a cold
    build prints its start and a training progress bar on stderr."""
    from spec_align.tiny import build_tiny_model

    return build_tiny_model(progress=True)


FIXTURES = [
    Fixture(
        name="spec-align-tiny",
        build="spec_align.fixtures:build_tiny",
        # Measured 2026-12-01 from an empty cache, one thread: 423 s CPU (416 user + 7 sys);
        # 858 s wall on a 2-core machine shared with three other training jobs (49 % CPU).
        cold_seconds=423.0,
        entries=("spec-align-tiny",),
        description="Llama 4x96 chat model trained on synthetic rule-checked scenarios",
    ),
]
