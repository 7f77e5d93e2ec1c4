"""cuda-analyst's default-tier fixture: the evaluation cache of the pre-written candidates.

The 16 pre-written candidates (4 claim tasks x fail/wrong/slow/fast) and the 4 task baselines
are compiled, checked and timed once on the C backend in the sandbox; their results are stored
by evaluation key through ``zoo.cached`` (keyed by the sources, the compiler flags and the
evaluator's code digest). ``cold_seconds`` is a measured cold build on this project's shared
2-core machine.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from llmcore.fixtures import Fixture

EVAL_CACHE_NAME = "cuda-analyst-evalcache"


def eval_cache_material(tasks: tuple[str, ...] | None = None) -> dict[str, Any]:
    from cuda_analyst.backends import CBackend
    from cuda_analyst.candidates import CLAIM_TASKS, all_candidates
    from cuda_analyst.evaluator import evaluator_digest
    from cuda_analyst.tasks import get_task

    tasks = tasks or CLAIM_TASKS
    srcs = sorted(all_candidates(tasks).values()) + [get_task(t).baseline_src for t in tasks]
    return {
        "tasks": list(tasks),
        "sources": hashlib.sha256(json.dumps(srcs).encode()).hexdigest(),
        "flags": list(CBackend.__init__.__kwdefaults__["flags"]),
        "cc": _cc_version(),
        "evaluator": evaluator_digest(),
    }


def _cc_version() -> str:
    import shutil
    import subprocess

    cc = shutil.which("gcc") or shutil.which("cc") or ""
    if not cc:
        return ""
    return subprocess.run([cc, "-dumpfullversion"], capture_output=True, text=True).stdout.strip()


def build_eval_cache(tasks: tuple[str, ...] | None = None, progress: bool = False) -> Any:
    """Build (or load) the zoo entry holding ``results/<key>.json`` for every candidate."""
    from cuda_analyst.backends import CBackend
    from cuda_analyst.candidates import CLAIM_TASKS, EXPECTED_STATUS, all_candidates
    from cuda_analyst.evaluator import EvalCache, Evaluator
    from cuda_analyst.tasks import get_task
    from llmcore import zoo

    tasks = tasks or CLAIM_TASKS

    def make(out: Path) -> dict[str, Any]:
        cache = EvalCache(out / "results")
        backend = CBackend()
        statuses, scores = {}, {}
        for t in tasks:
            ev = Evaluator(get_task(t), backend, cache=cache)
            ev.evaluate(get_task(t).baseline_src)
        for (t, kind), src in all_candidates(tasks).items():
            r = Evaluator(get_task(t), backend, cache=cache).evaluate(src)
            statuses[f"{t}/{kind}"] = r.status
            scores[f"{t}/{kind}"] = round(r.combined_score, 3)
            if r.status != EXPECTED_STATUS[kind]:
                raise RuntimeError(
                    f"{t}/{kind} evaluated {r.status}, expected {EXPECTED_STATUS[kind]}: {r.error}"
                )
        return {"statuses": statuses, "scores": scores, "n": len(cache.mem)}

    return zoo.cached(EVAL_CACHE_NAME, eval_cache_material(tasks), make, progress=progress,
                      description="evaluation cache of the pre-written candidates (C backend)")  # fmt: skip


def load_eval_cache(progress: bool = False) -> Any:
    """An :class:`~cuda_analyst.evaluator.EvalCache` preloaded from the fixture (read-only)."""
    from cuda_analyst.evaluator import EvalCache

    entry = build_eval_cache(progress=progress)
    return EvalCache(Path(entry.path) / "results", writable=False), entry


FIXTURES = [
    Fixture(
        name="cuda-analyst-evalcache",
        build="cuda_analyst.fixtures:build_eval_cache",
        cold_seconds=21.4,
        entries=(EVAL_CACHE_NAME,),
        description="C-backend evaluation cache of the 16 pre-written candidates + 4 baselines",
    )
]
