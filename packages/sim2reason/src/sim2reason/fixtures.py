"""sim2reason's default-tier test fixtures, registered for llmcore's fixture phase.

``build`` is called with no arguments in a fresh single-thread worker and returns the
``ZooEntry`` it built or loaded. ``cold_seconds`` are the CPU seconds (user + system, one
torch thread) of a cold build on this project's shared 2-core machine, split between the two
fixtures by their wall times (the machine was loaded, so wall times ran about 1.4x longer;
see the README).
"""

from __future__ import annotations

from typing import Any

from llmcore.fixtures import Fixture


def build_warm_start() -> Any:
    from sim2reason.arm import build_warm_start as _build

    return _build(progress=False)


def build_arm() -> Any:
    from sim2reason.arm import build_arm as _build

    return _build(progress=False)


FIXTURES = [
    Fixture(
        name="sim2reason-warm",
        build="sim2reason.fixtures:build_warm_start",
        cold_seconds=130.0,
        entries=("sim2reason-warm",),
        description="2x128 char Llama, completion-only SFT on textbook worked solutions, "
        "gated to proxy accuracy in [0.10, 0.40]",
    ),
    Fixture(
        name="sim2reason-grpo-arm",
        build="sim2reason.fixtures:build_arm",
        cold_seconds=196.0,
        requires=("sim2reason-warm",),
        entries=("sim2reason-grpo-arm",),
        description="prefilter + GRPO (tiny preset) on simulator QA from the warm start",
    ),
]
