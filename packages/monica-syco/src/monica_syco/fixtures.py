"""monica-syco's default-tier test fixture, registered for llmcore's fixture phase.

``build`` is called with no arguments in a fresh single-thread worker and returns the
``ZooEntry`` it built or loaded; ``cold_seconds`` is the measured one-thread cold build on this
project's shared 2-core machine, in CPU seconds (user + system; the wall time under the
machine's load was 105-136 s, see the README's "Tests")."""

from __future__ import annotations

from typing import Any

from llmcore.fixtures import Fixture


def build_world_model() -> Any:
    from monica_syco.world import build_tiny_model

    return build_tiny_model(progress=False)


FIXTURES = [
    Fixture(
        name="monica-syco-world",
        build="monica_syco.fixtures:build_world_model",
        cold_seconds=82.0,
        entries=("monica-colour-world",),
        description="4 x 96 Llama reasoning model of the colour world, 250 steps (precondition gates)",
    )
]
