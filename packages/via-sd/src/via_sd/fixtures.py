"""via-sd's default-tier test fixtures, registered for llmcore's fixture phase.

Each ``build`` is called with no arguments in a fresh single-thread worker and returns the
``ZooEntry`` it built or loaded. ``cold_seconds`` are measured cold builds on one torch thread
(this project's 2-core machine, shared with other builds; see the README's "Tests and
fixtures"). The drafters do not need the target's weights (they share its corpus and tokenizer
spec, so the tokenizer is the same); the agreement gate that ties them is checked by
:func:`via_sd.tiny.build_fixtures` when the tests load them.
"""

from __future__ import annotations

from typing import Any

from llmcore.fixtures import Fixture

#: The stronger drafter of ``test_claim_strong_drafter_regime_favours_via``.
STRONG_DRAFTER_STEPS = 1200


def build_target() -> Any:
    from via_sd.tiny import build_target as _build

    return _build(progress=False)


def build_mask() -> Any:
    from via_sd.tiny import build_searched_mask

    return build_searched_mask()


def build_drafter() -> Any:
    from llmcore import zoo
    from via_sd.tiny import drafter_recipe

    return zoo.build(drafter_recipe(), progress=False)


def build_strong_drafter() -> Any:
    from llmcore import zoo
    from via_sd.tiny import drafter_recipe

    return zoo.build(drafter_recipe(STRONG_DRAFTER_STEPS), progress=False)


def build_demo_drafter() -> Any:
    from llmcore import zoo
    from via_sd.demo import demo_drafter_recipe

    return zoo.build(demo_drafter_recipe(), progress=False)


FIXTURES = [
    Fixture(
        name="via-sd-target",
        build="via_sd.fixtures:build_target",
        cold_seconds=733.0,
        entries=("via-sd-target",),
        description="8-layer Llama target q (answer-only loss, layer dropout), list language",
    ),
    Fixture(
        name="via-sd-mask",
        build="via_sd.fixtures:build_mask",
        cold_seconds=14.0,
        requires=("via-sd-target",),
        entries=("via-sd-mask",),
        description="DIMR-searched skip mask of the target (the claim tests' slim verifier)",
    ),
    Fixture(
        name="via-sd-drafter",
        build="via_sd.fixtures:build_drafter",
        cold_seconds=15.0,
        entries=("via-sd-drafter",),
        description="2-layer Llama drafter p, 300 steps (agreement with q in [0.6, 0.9])",
    ),
    Fixture(
        name="via-sd-drafter-strong",
        build="via_sd.fixtures:build_strong_drafter",
        cold_seconds=96.0,
        entries=("via-sd-drafter-1200",),
        description="the same drafter trained 1,200 steps (strong-drafter regime claim)",
    ),
    Fixture(
        name="via-sd-demo-drafter",
        build="via_sd.fixtures:build_demo_drafter",
        cold_seconds=8.4,
        entries=("via-sd-demo-drafter",),
        description="1-layer drafter for `llmcore demo via-sd` (tiny-llama's tokenizer)",
    ),
]
