"""compgen-rl's default-tier test fixtures, registered for llmcore's fixture phase.

Each ``build`` is called with no arguments in a fresh single-thread worker and returns the
``ZooEntry`` it built or loaded. ``cold_seconds`` are measured cold builds on one torch thread
on this project's shared 2-core machine (under load from other builds; see the README).
"""

from __future__ import annotations

from typing import Any

from llmcore.fixtures import Fixture


def build_sft_model() -> Any:
    from compgen_rl.tiny import build_sft

    return build_sft()


def build_rl_arm() -> Any:
    from compgen_rl.tiny import build_rl_arm as _arm
    from compgen_rl.tiny import build_sft

    return _arm(build_sft())


def build_demo_model() -> Any:
    from compgen_rl.demo import build_demo_sft

    return build_demo_sft()


FIXTURES = [
    Fixture(
        name="compgen-rl-sft",
        build="compgen_rl.fixtures:build_sft_model",
        cold_seconds=363.0,
        entries=("compgen-rl-sft",),
        description="2x128 Llama SFT (1,000 x 64) on the routing-context split; gate seen >= 0.5, unseen <= 0.9",
    ),
    Fixture(
        name="compgen-rl-sft-rl",
        build="compgen_rl.fixtures:build_rl_arm",
        cold_seconds=117.0,
        requires=("compgen-rl-sft",),
        entries=("compgen-rl-sft-rl",),
        description="SFT -> prefilter (1,000 x 8, 128 prompts per call) -> GRPO 60 x (8 x 8), lr 2e-5: the D1 claim arm",
    ),
    Fixture(
        name="compgen-rl-demo",
        build="compgen_rl.fixtures:build_demo_model",
        cold_seconds=21.0,
        entries=("compgen-rl-demo",),
        description="demo-size 2x64 Llama, 150 SFT steps",
    ),
]
