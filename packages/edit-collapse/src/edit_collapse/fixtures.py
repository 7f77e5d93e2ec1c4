"""Default-tier fixtures, registered for llmcore's fixture phase: the world model and the seed-0
sequential edit sessions (T = 1, 10, 50) of FT-M, ROME, MEMIT, AlphaEdit and retrieval, whose
results the claim tests read. ``cold_seconds`` are measured one-thread cold builds on this
project's shared 2-core machine (under load; see the README)."""

from __future__ import annotations

from typing import Any

from llmcore.fixtures import Fixture

SESSION_METHODS = ("ft-m", "rome", "memit", "alphaedit", "retrieval")


def build_world_model() -> Any:
    from edit_collapse.tiny import build_world_model as _build

    return _build()


def build_sessions() -> Any:
    from edit_collapse.experiments import session_entry

    return [session_entry(m, seed=0) for m in SESSION_METHODS]


FIXTURES = [
    Fixture(
        name="edit-collapse-world",
        build="edit_collapse.fixtures:build_world_model",
        cold_seconds=287.0,
        entries=("edit-collapse-world-40x4",),
        description="Llama 4x128 on a 40x4 synthetic world, gated on recall >= 0.95, reasoning >= 0.70",
    ),
    Fixture(
        name="edit-collapse-sessions",
        build="edit_collapse.fixtures:build_sessions",
        cold_seconds=130.0,
        requires=("edit-collapse-world",),
        entries=tuple(f"edit-collapse-session-{m}-s0" for m in SESSION_METHODS),
        description="seed-0 sequential sessions (T = 1, 10, 50) of five editors on the world model",
    ),
]
