"""selfverify-rl's default-tier test fixtures, registered for llmcore's fixture phase.

Each ``build`` is called with no arguments in a fresh single-thread worker and returns the
``ZooEntry`` it built or loaded. ``cold_seconds`` are measured cold builds on one torch thread on
this project's shared 2-core machine (under load from other builds; see the README).
"""

from __future__ import annotations

from typing import Any

from llmcore.fixtures import Fixture


def build_warmup() -> Any:
    from selfverify_rl.experiments import build_warmup as _build

    return _build()


def build_evalset() -> Any:
    from selfverify_rl.experiments import build_evalset as _build

    return _build()


FIXTURES = [
    Fixture(
        name="selfverify-warmup",
        build="selfverify_rl.fixtures:build_warmup",
        cold_seconds=104.0,
        entries=("selfverify-warmup-d2",),
        description="Llama 2 x 128 SFT on addition scratchpads + weak (mostly verdict-only) verification",
    ),
    Fixture(
        name="selfverify-evalset",
        build="selfverify_rl.fixtures:build_evalset",
        cold_seconds=33.0,
        requires=("selfverify-warmup",),
        entries=("selfverify-evalset-d2",),
        description="500 held-out problems + 512 balanced candidates sampled from the warm-up model",
    ),
]
