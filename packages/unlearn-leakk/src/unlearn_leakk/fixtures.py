"""Default-tier test fixtures, registered for llmcore's fixture phase (built before the tests).

The world model (zoo entry ``leakk-world``) and the greedy-stopped GradDiff and NPO baselines
of seeds 0-2 that the default-tier claim tests read (zoo entries
``leakk-baseline-{GradDiff,NPO}-s{seed}``, built through :func:`llmcore.zoo.cached` by
:func:`unlearn_leakk.experiment.ensure_baseline`). ``cold_seconds``: measured from an empty
``LLMCORE_CACHE_DIR`` (the world model copied in for the baselines), one thread, CPU seconds on
the shared 2-core machine.
"""

from __future__ import annotations

from typing import Any

from llmcore.fixtures import Fixture

#: Learning rate of the NPO claim's baselines (at GradDiff's 3e-5, NPO never reaches the stop).
NPO_LR = 3e-4


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


def _npo_baseline(seed: int) -> Any:
    from unlearn_leakk.experiment import WorldConfig, ensure_baseline

    return ensure_baseline(WorldConfig(seed=seed, method="NPO", lr=NPO_LR))


def build_npo_baseline_seed0() -> Any:
    """Greedy-stopped NPO baseline, seed 0 (forget pair 0)."""
    return _npo_baseline(0)


def build_npo_baseline_seed1() -> Any:
    """Greedy-stopped NPO baseline, seed 1 (forget pair 1)."""
    return _npo_baseline(1)


def build_npo_baseline_seed2() -> Any:
    """Greedy-stopped NPO baseline, seed 2 (forget pair 2)."""
    return _npo_baseline(2)


_BASELINE_COLD = {0: 91.0, 1: 69.0, 2: 53.0}
_NPO_COLD = {0: 46.0, 1: 57.0, 2: 34.0}

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
            entries=(f"leakk-baseline-GradDiff-s{s}",),
            description=f"GradDiff stopped at greedy forget accuracy <= 0.1, seed {s}",
        )
        for s, cold in _BASELINE_COLD.items()
    ),
    *(
        Fixture(
            name=f"unlearn-leakk-npo-baseline-seed{s}",
            build=f"unlearn_leakk.fixtures:build_npo_baseline_seed{s}",
            cold_seconds=cold,
            requires=("unlearn-leakk-world",),
            entries=(f"leakk-baseline-NPO-s{s}",),
            description=f"NPO (lr 3e-4) stopped at greedy forget accuracy <= 0.1, seed {s}",
        )
        for s, cold in _NPO_COLD.items()
    ),
]
