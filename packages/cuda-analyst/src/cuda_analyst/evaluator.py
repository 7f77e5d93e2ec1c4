"""The evaluator: official status lattice with robust-kbench guards (paper Sec. 3).

``FAIL < COMPILE < PASS < FAST``: a build error is FAIL; a candidate that builds but crashes,
times out or mismatches the reference is COMPILE; a valid score is PASS, and FAST when
``combined_score = t_base / t_custom > 1 + tol`` (``tol = 0.12``). Guards: inputs of several
seeds and two shapes, forbidden library calls, a > 10x speedup or a run faster than a
STREAM-style copy of its minimum traffic is flagged ``suspicious`` and never FAST. Results are
cached by SHA-256 of (source, backend flags, task, seeds, sizes) and the evaluator's code digest.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import shutil
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cuda_analyst.backends import KernelBackend, Timing, can_time
from cuda_analyst.errors import AnalystValueError
from cuda_analyst.tasks import Task

STATUS_ORDER = ("FAIL", "COMPILE", "PASS", "FAST")
EXCESSIVE_SPEEDUP = 10.0


def status_rank(status: str) -> int:
    return STATUS_ORDER.index(status)


@dataclass
class Result:
    """One evaluation: official status, score, error JSON and the raw feedback material."""

    status: str
    combined_score: float = 0.0
    error: dict[str, Any] | None = None
    backend: str = ""
    task: str = ""
    suspicious: str = ""
    compile_log: str = ""
    check: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, Any] = field(default_factory=dict)
    isolation: dict[str, Any] = field(default_factory=dict)
    cached: bool = False
    reports: list[dict[str, Any]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.status in ("PASS", "FAST")

    def metrics(self) -> dict[str, Any]:
        """OpenEvolve-style metrics dict (``combined_score`` and the status)."""
        return {
            "combined_score": round(self.combined_score, 4),
            "status": self.status,
            "backend": self.backend,
        }

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("cached")
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Result:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


@functools.lru_cache(maxsize=1)
def evaluator_digest() -> str:
    """``zoo.code_digest`` of the code that decides a result."""
    from llmcore import zoo

    return zoo.code_digest(
        "cuda_analyst.evaluator",
        "cuda_analyst.backends",
        "cuda_analyst.tasks",
        "cuda_analyst.sandbox",
        "cuda_analyst.kernelbench",
        "cuda_analyst._pyrunner",
        "cuda_analyst._kbrunner",
    )


class EvalCache:
    """SHA-256-keyed results, in memory and optionally mirrored to a folder of JSON files."""

    def __init__(self, folder: Path | None = None, *, writable: bool = True) -> None:
        self.mem: dict[str, dict[str, Any]] = {}
        self.folder = Path(folder) if folder else None
        self.writable = writable
        self.hits = self.misses = 0
        if self.folder and self.folder.exists():
            for p in self.folder.glob("*.json"):
                try:
                    self.mem[p.stem] = json.loads(p.read_text())
                except (OSError, json.JSONDecodeError):
                    continue

    def get(self, key: str) -> Result | None:
        d = self.mem.get(key)
        if d is None:
            self.misses += 1
            return None
        self.hits += 1
        r = Result.from_json(d)
        r.cached = True
        return r

    def put(self, key: str, result: Result) -> None:
        self.mem[key] = result.to_json()
        if self.folder and self.writable:
            from llmcore.data import atomic_write_json

            self.folder.mkdir(parents=True, exist_ok=True)
            atomic_write_json(self.folder / f"{key}.json", self.mem[key])


class Evaluator:
    """Evaluate candidate sources for one task on one backend."""

    def __init__(
        self,
        task: Task,
        backend: KernelBackend,
        tol_fast: float = 0.12,
        timeouts: tuple[float, float] = (60.0, 30.0),
        *,
        seeds: tuple[int, ...] = (0, 1, 2),
        warmup: int = 2,
        repeat: int = 15,
        cache: EvalCache | None = None,
        timer: Callable[[Path, Task], Timing] | None = None,
    ) -> None:
        if not tol_fast > 0:
            raise AnalystValueError(f"tol_fast must be > 0, got {tol_fast!r}")
        if repeat < 15 and timer is None:
            raise AnalystValueError(f"repeat must be >= 15 for the timing protocol, got {repeat}")
        self.task, self.backend, self.tol_fast = task, backend, tol_fast
        if hasattr(backend, "compile_timeout"):
            backend.compile_timeout, backend.run_timeout = timeouts
        self.seeds, self.warmup, self.repeat = tuple(seeds), warmup, repeat
        self.cache = cache if cache is not None else EvalCache()
        self.timer = timer
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    def key(self, src: str) -> str:
        flags = list(getattr(self.backend, "flags", ()))
        material = [src, self.backend.name, flags, self.task.name, self.task.signature,
                    self.task.check_size, self.task.time_size, list(self.seeds), self.tol_fast,
                    self.repeat, evaluator_digest()]  # fmt: skip
        return hashlib.sha256(json.dumps(material).encode()).hexdigest()

    def evaluate(self, src: str | None) -> Result:
        """Status, score and error of ``src`` (``None``/empty: a codeless reply, FAIL)."""
        if not src or not src.strip():
            return Result("FAIL", error={"stage": "extract", "reason": "No code block in reply"},
                          backend=self.backend.name, task=self.task.name)  # fmt: skip
        key = self.key(src) if self.timer is None else hashlib.sha256(src.encode()).hexdigest()
        with self._guard:  # one evaluation per source at a time (threads share artifacts)
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if self.timer is None:
                hit = self.cache.get(key)
                if hit is not None:
                    return hit
            workdirs: list[Path] = []
            try:
                res = self._evaluate(src, workdirs)
            finally:
                for d in workdirs:
                    shutil.rmtree(d, ignore_errors=True)
            if self.timer is None:
                self.cache.put(key, res)
        return res

    def _evaluate(self, src: str, workdirs: list[Path]) -> Result:
        task, be = self.task, self.backend
        base = {"backend": be.name, "task": task.name}
        bad = [f for f in task.forbidden if f in src]
        if bad:
            return Result(
                "FAIL", error={"stage": "build", "reason": f"Forbidden construct: {bad}"}, **base
            )
        comp = be.compile(src, task)
        if comp.workdir is not None:
            workdirs.append(comp.workdir)
        base["isolation"] = comp.isolation
        if not comp.ok:
            err = {
                "stage": "build",
                "reason": comp.reason or "Compilation Error",
                "stderr": comp.log[-4000:],
            }
            return Result("FAIL", error=err, compile_log=comp.log[-4000:], **base)
        chk = be.check(comp.artifact, task, self.seeds)
        check = {"ok": chk.ok, "max_abs": _num(chk.max_abs), "mean_abs": _num(chk.mean_abs),
                 "failing_seed": chk.failing_seed, "reason": chk.reason}  # fmt: skip
        if not chk.ok:
            stage = "verify" if chk.reason.startswith("Mismatch") else "run"
            err = {"stage": stage, "reason": chk.reason, "stderr": chk.log[-2000:], "failing_seed": chk.failing_seed,
                   "max_abs": _num(chk.max_abs)}  # fmt: skip
            return Result("COMPILE", error=err, compile_log=comp.log[-4000:], check=check, **base)
        if self.timer is None and not can_time(be, task):
            # correct, but this backend/task pair has no meaningful speedup: PASS, score 0
            why = (f"backend {be.name!r} gives no meaningful timing" if task.timed
                   else f"task {task.name!r} has no baseline to time against")  # fmt: skip
            return Result("PASS", 0.0, None, check=check, compile_log=comp.log[-4000:],
                          timing={"meaningful": False, "note": why}, **base)  # fmt: skip
        tm = (
            self.timer(comp.artifact, task)
            if self.timer
            else be.time(comp.artifact, task, self.warmup, self.repeat)
        )
        timing = {k: _num(v) for k, v in asdict(tm).items() if k not in ("log",)}
        if not tm.ok:
            err = {"stage": "run", "reason": tm.reason, "stderr": tm.log[-2000:]}
            return Result("COMPILE", error=err, check=check, timing=timing, **base)
        score = tm.speedup
        timing["speedup"] = _num(score)
        suspicious = ""
        if score > EXCESSIVE_SPEEDUP:
            suspicious = f"speedup {score:.1f}x exceeds {EXCESSIVE_SPEEDUP:.0f}x over the baseline"
        elif (
            task.bytes_moved is not None
            and math.isfinite(tm.copy_bytes_per_s)
            and tm.copy_bytes_per_s > 0
        ):
            xs, _ = task.inputs(10_000, task.time_size)
            bound_ns = task.bytes_moved(xs) / tm.copy_bytes_per_s * 1e9
            timing["bound_ns"] = bound_ns
            if tm.cand_min < 0.5 * bound_ns:
                suspicious = f"{tm.cand_min:.0f} ns beats the memory-copy bound {bound_ns:.0f} ns"
        status = "FAST" if score > 1 + self.tol_fast and not suspicious else "PASS"
        return Result(status, score, None, check=check, timing=timing, suspicious=suspicious,
                      compile_log=comp.log[-4000:], **base)  # fmt: skip


def _num(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x
