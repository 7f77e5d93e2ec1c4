"""Default-tier test fixtures, registered for llmcore's fixture phase (``llmcore zoo build
--fixtures``), which builds every package's fixtures before the tests run."""

from __future__ import annotations

from typing import Any

from llmcore.fixtures import Fixture


def build_tiny() -> Any:
    """The spec-align tiny model (a zoo entry; see :func:`spec_align.tiny.build_tiny_model`)."""
    from spec_align.tiny import build_tiny_model

    return build_tiny_model(progress=False)


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
