"""ptdi's default-tier test fixture, registered for llmcore's fixture phase.

``build`` is called with no arguments in a fresh single-thread worker and returns the
``ZooEntry`` it built or loaded. ``cold_seconds`` is a measured cold build on one torch thread
on this project's shared 2-core machine (under load from other builds; see the README).
"""

from __future__ import annotations

from typing import Any

from llmcore.fixtures import Fixture


def build_members_model() -> Any:
    from ptdi.tiny import build_members_model as _build

    return _build(progress=False)


def build_demo_model() -> Any:
    from ptdi.tiny import DEMO_DOCS, DEMO_STEPS
    from ptdi.tiny import build_members_model as _build

    return _build(DEMO_STEPS, n_docs=DEMO_DOCS, progress=False)


FIXTURES = [
    Fixture(
        name="ptdi-members",
        build="ptdi.fixtures:build_members_model",
        cold_seconds=72.0,
        entries=("ptdi-members-70",),
        description="Llama 4 x 128 trained 70 steps on the 300 member documents (loss AUC >= 0.8)",
    ),
    Fixture(
        name="ptdi-demo",
        build="ptdi.fixtures:build_demo_model",
        cold_seconds=28.0,
        entries=("ptdi-demo-300-50",),
        description="demo-size Llama 4 x 128, 50 steps on 150 member documents (loss AUC >= 0.8)",
    ),
]
