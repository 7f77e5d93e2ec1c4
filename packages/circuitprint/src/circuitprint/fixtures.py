"""circuitprint's default-tier test fixtures, registered for llmcore's fixture phase.

Each ``build`` is called with no arguments in a fresh single-thread worker and returns the
``ZooEntry`` objects it built or loaded. ``cold_seconds`` are measured cold builds on one torch
thread on this project's shared 2-core machine (under load from other builds; see the README).
"""

from __future__ import annotations

from typing import Any

from llmcore.fixtures import Fixture


def build_protected() -> Any:
    from circuitprint.tiny import build_base

    return build_base(0)


def build_independent_1() -> Any:
    from circuitprint.tiny import build_base

    return build_base(1)


def build_independent_3() -> Any:
    from circuitprint.tiny import build_base

    return build_base(3)


def build_derivatives() -> list[Any]:
    """FT1, FT2 (lr 1e-4), LoRA, M-lin and M-ties of P."""
    from circuitprint.tiny import build_base, build_finetune, build_lora, build_merge

    p = build_base(0)
    ft1 = build_finetune(p, half=0, seed=1)
    ft2 = build_finetune(p, half=1, seed=2)
    return [
        ft1,
        ft2,
        build_lora(p),
        build_merge("linear", p, [ft1, ft2]),
        build_merge("ties", p, [ft1, ft2]),
    ]


FIXTURES = [
    Fixture(
        name="circuitprint-p",
        build="circuitprint.fixtures:build_protected",
        cold_seconds=81.0,
        entries=("circuitprint-twohop-s0",),
        description="protected model P: Llama 2 x 64 on the two-hop task, seed 0 (acc >= 0.99)",
    ),
    Fixture(
        name="circuitprint-i1",
        build="circuitprint.fixtures:build_independent_1",
        cold_seconds=58.0,
        entries=("circuitprint-twohop-s1",),
        description="independent model I1 (seed 1), the reference pool",
    ),
    Fixture(
        name="circuitprint-i3",
        build="circuitprint.fixtures:build_independent_3",
        cold_seconds=56.0,
        entries=("circuitprint-twohop-s3",),
        description="held-out independent model I3 (seed 3)",
    ),
    Fixture(
        name="circuitprint-derivatives",
        build="circuitprint.fixtures:build_derivatives",
        cold_seconds=108.0,
        requires=("circuitprint-p",),
        entries=(
            "circuitprint-ft-h0-s1",
            "circuitprint-ft-h1-s2",
            "circuitprint-lora-s5",
            "circuitprint-merge-linear",
            "circuitprint-merge-ties",
        ),
        description="FT1/FT2 (P + 500 steps at lr 1e-4), LoRA, M-lin, M-ties",
    ),
]
