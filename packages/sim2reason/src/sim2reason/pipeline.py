"""Scenes to filtered QA in a process pool (the paper's data pipeline, Sec. 3).

Each scene is simulated, turned into questions of the requested kinds, and passed through the
shortcut filter in one worker; unstable or failing scenes are dropped with a reason instead of
producing questions.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from sim2reason.dsl import Scene, scene_from_dict, scene_to_dict
from sim2reason.errors import ConfigError, Sim2ReasonError
from sim2reason.qa import KINDS, QAPair

__all__ = ["PipelineResult", "scenes_to_qa"]

log = logging.getLogger(__name__)


@dataclass
class PipelineResult:
    qas: list[QAPair] = field(default_factory=list)
    generated: int = 0
    """Questions before the shortcut filter."""
    dropped: dict[str, str] = field(default_factory=dict)
    """Scene name -> reason it produced no questions (unstable run, unsupported family...)."""


def _one(args: tuple[dict[str, Any], str, tuple[str, ...], int, int, bool, float,
                     int | None]) -> tuple[list[dict[str, Any]], int, str]:  # fmt: skip
    from sim2reason.engines import get_engine
    from sim2reason.filters import shortcut_filter
    from sim2reason.qa import generate_qa

    sdict, engine_name, kinds, per_scene, seed, do_filter, rel_tol, max_children = args
    try:
        scene = scene_from_dict(sdict)  # validates: an unimplemented entity type is dropped
        eng = get_engine(engine_name)
        rec = eng.simulate(scene)
        if rec.unstable:
            return [], 0, f"unstable: {rec.reason}"
        qas: list[QAPair] = []
        for kind in kinds:
            rng = random.Random(f"{seed}:{scene.name}:{kind}")
            qas += generate_qa(scene, rec, kind, per_scene, rng, engine=eng)
        n = len(qas)
        if do_filter:
            qas = shortcut_filter(qas, scene, eng, rel_tol, max_children=max_children)
        return [q.to_dict() for q in qas], n, ""
    except Sim2ReasonError as e:
        return [], 0, f"{type(e).__name__}: {e}"


def scenes_to_qa(scenes: Sequence[Scene], *, engine: str = "analytic",
                 kinds: Sequence[str] = ("numeric",), per_scene: int = 10, seed: int = 0,
                 shortcut: bool = True, rel_tol: float = 0.05, max_children: int | None = None,
                 workers: int = 2) -> PipelineResult:  # fmt: skip
    """Simulate, generate and filter every scene (``workers`` processes; 1 = in process)."""
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise ConfigError(f"kinds {bad}: use {KINDS}")
    if workers < 1:
        raise ConfigError(f"workers={workers!r}: must be >= 1")
    jobs = [(scene_to_dict(s), engine, tuple(kinds), per_scene, seed, shortcut, rel_tol,
             max_children) for s in scenes]  # fmt: skip
    if workers == 1:
        results = list(map(_one, jobs))
    else:
        import multiprocessing as mp

        with ProcessPoolExecutor(workers, mp_context=mp.get_context("fork")) as ex:
            results = list(ex.map(_one, jobs, chunksize=max(1, len(jobs) // (8 * workers))))
    out = PipelineResult()
    for scene, (rows, n, reason) in zip(scenes, results, strict=True):
        out.generated += n
        if reason:
            out.dropped[scene.name] = reason
            log.warning("scene %s dropped: %s", scene.name, reason)
        out.qas += [QAPair.from_dict(r) for r in rows]
    return out
