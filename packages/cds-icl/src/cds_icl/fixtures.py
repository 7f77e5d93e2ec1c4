"""cds-icl's default-tier test fixture, registered for llmcore's fixture phase.

``cold_seconds`` is a measured cold build on one torch thread on this project's shared 2-core
machine (under load from other builds, see the README)."""

from __future__ import annotations

from typing import Any

from llmcore.fixtures import Fixture


def build_tiny_model() -> Any:
    from cds_icl.tiny import build_tiny

    return build_tiny(progress=False)


FIXTURES = [
    Fixture(
        name="cds-icl-tiny",
        build="cds_icl.fixtures:build_tiny_model",
        cold_seconds=216.0,
        entries=("cds-icl-tiny-150",),
        description="word-level Llama 4 x 128, 150 packed-window steps on synthetic CoT prompts",
    )
]
