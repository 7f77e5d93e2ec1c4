"""d3llm's default-tier test fixtures, registered for llmcore's fixture phase.

Each ``build`` is called with no arguments in a fresh single-thread worker and returns the
``ZooEntry`` it built or loaded. ``cold_seconds`` are measured cold builds on one torch thread
on this project's shared 2-core machine (under heavy load from other builds; see the README).
The calibrated fixture (teacher, trajectories, student) serves the claim tests; the demo-size
models serve the demo, the lm-eval test and ``d3llm bench --size demo``.
"""

from __future__ import annotations

from typing import Any

from llmcore.fixtures import Fixture


def build_teacher() -> Any:
    from d3llm.tiny import build_teacher as _build

    return _build()


def build_trajectories() -> Any:
    from d3llm.tiny import build_teacher as _teacher
    from d3llm.tiny import build_trajectories as _build

    return _build(_teacher())


def build_student() -> Any:
    from d3llm.tiny import setup

    return setup("fixture")["student"]


def build_demo_teacher() -> Any:
    from d3llm.tiny import DEMO_STEPS, DEMO_TASK, build_teacher

    return build_teacher(
        DEMO_STEPS, 3e-3, 32, task=DEMO_TASK, hidden=64, layers=2, gate=0.0,
        name="d3llm-demo-teacher",
    )  # fmt: skip


def build_demo_student() -> Any:
    from d3llm.tiny import setup

    return setup("demo")["student"]


FIXTURES = [
    Fixture(
        name="d3llm-teacher",
        build="d3llm.fixtures:build_teacher",
        cold_seconds=114.0,
        entries=("d3llm-teacher",),
        description="masked-diffusion Llama 4 x 64, 1,000 steps on 4-digit copy + running parity "
        "(vanilla accuracy >= 0.85 gate)",
    ),
    Fixture(
        name="d3llm-trajectories",
        build="d3llm.fixtures:build_trajectories",
        cold_seconds=38.0,
        requires=("d3llm-teacher",),
        entries=("d3llm-trajectories",),
        description="teacher unmasking orders on 512 training prompts (retry ladder)",
    ),
    Fixture(
        name="d3llm-student",
        build="d3llm.fixtures:build_student",
        cold_seconds=51.0,
        requires=("d3llm-trajectories",),
        entries=("d3llm-student",),
        description="teacher distilled on its pseudo-trajectories (6 epochs, blocks 4/8/12)",
    ),
    Fixture(
        name="d3llm-demo-teacher",
        build="d3llm.fixtures:build_demo_teacher",
        cold_seconds=41.0,
        entries=("d3llm-demo-teacher",),
        description="masked-diffusion Llama 2 x 64, 200 steps on 3-digit copy + running parity",
    ),
    Fixture(
        name="d3llm-demo-student",
        build="d3llm.fixtures:build_demo_student",
        cold_seconds=36.0,
        requires=("d3llm-demo-teacher",),
        entries=("d3llm-demo-student", "d3llm-trajectories"),
        description="demo teacher's trajectories (256 prompts) and its distilled student",
    ),
]
