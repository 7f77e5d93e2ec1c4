"""Default-tier test fixtures, registered for llmcore's fixture phase (built before the tests).

The world model (a zoo entry) and the greedy-stopped GradDiff baselines of seeds 0-2 that the
default-tier claim tests read (cached beside the zoo by
:func:`unlearn_leakk.experiment.ensure_baseline`). ``cold_seconds``: measured from an empty
``LLMCORE_CACHE_DIR``, one thread, CPU seconds on the shared 2-core machine.
"""

from __future__ import annotations

from typing import Any

from llmcore.fixtures import Fixture


def build_world() -> Any:
    """The 20-author world model (zoo entry ``leakk-world``)."""
    from llmcore import zoo
    from unlearn_leakk.world import world_recipe

    return zoo.build(world_recipe(), progress=False)


def _baseline(seed: int) -> Any:
    from unlearn_leakk.experiment import WorldConfig, ensure_baseline

    return ensure_baseline(WorldConfig(seed=seed))


def build_baseline_seed0() -> Any:
    """Greedy-stopped GradDiff baseline, seed 0 (forget pair 0)."""
    return _baseline(0)


def build_baseline_seed1() -> Any:
    """Greedy-stopped GradDiff baseline, seed 1 (forget pair 1)."""
    return _baseline(1)


def build_baseline_seed2() -> Any:
    """Greedy-stopped GradDiff baseline, seed 2 (forget pair 2)."""
    return _baseline(2)


_BASELINE_COLD = {0: 57.0, 1: 53.0, 2: 40.0}

FIXTURES = [
    Fixture(
        name="unlearn-leakk-world",
        build="unlearn_leakk.fixtures:build_world",
        cold_seconds=145.0,
        entries=("leakk-world",),
        description="20-author fictitious-author world model (tiny Llama 4 x 128)",
    ),
    *(
        Fixture(
            name=f"unlearn-leakk-baseline-seed{s}",
            build=f"unlearn_leakk.fixtures:build_baseline_seed{s}",
            cold_seconds=cold,
            requires=("unlearn-leakk-world",),
            entries=(f"unlearn-leakk/baseline-GradDiff-seed{s}",),
            description=f"GradDiff stopped at greedy forget accuracy <= 0.1, seed {s}",
        )
        for s, cold in _BASELINE_COLD.items()
    ),
]
