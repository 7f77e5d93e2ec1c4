"""The ``llmcore.fixtures`` entry-point group and the fixture phase that builds them all.

A method package's default-tier test fixtures (tiny models, derived checkpoints, cached method
runs) are registered so that CI can build every one of them first, in parallel, before any test
runs. A package declares in its ``pyproject.toml``::

    [project.entry-points."llmcore.fixtures"]
    via-sd = "via_sd.fixtures:FIXTURES"

where ``FIXTURES`` is a list of :class:`Fixture` (or a function returning one). Each fixture's
``build`` is a ``"module:function"`` string called with no arguments in a fresh single-thread
worker process; it builds (or loads from the zoo cache) and returns what it built: a
:class:`~llmcore.zoo.ZooEntry`, anything with a ``from_cache`` attribute, or a list of those.
Builders must be safe when two processes run them at once (the zoo's file lock does this).

``llmcore zoo build --fixtures [NAMES] --jobs N`` runs :func:`build_fixtures`: ready fixtures
start longest chain first (a fixture's priority is its own recorded cold seconds plus the
longest chain of fixtures that require it), so two workers finish as early as the longest chain
allows.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TextIO

from llmcore.errors import ConfigError, LLMCoreError, RegistryError

GROUP = "llmcore.fixtures"


class FixtureBuildError(LLMCoreError):
    """One or more fixtures failed to build; the message names each and its error."""


@dataclass(frozen=True)
class Fixture:
    """A default-tier test fixture that CI builds before the tests."""

    name: str
    """Unique name across packages, conventionally prefixed by the package (``via-sd-target``)."""
    build: str | Callable[[], Any]
    """``"module:function"`` called with no arguments in a worker process (or the callable, for
    in-process use)."""
    cold_seconds: float
    """Measured cold build time on one thread (schedules longest first; shown by ``zoo list``)."""
    requires: tuple[str, ...] = ()
    """Fixtures that must be built before this one (their names)."""
    entries: tuple[str, ...] = ()
    """Zoo entry names this fixture writes (``llmcore zoo list`` shows their package)."""
    description: str = ""
    package: str = ""
    """Distribution that registered it (filled in by :func:`discover`)."""

    def __post_init__(self) -> None:
        if not self.name or any(c.isspace() for c in self.name):
            raise RegistryError(f"fixture name {self.name!r} must be a non-empty word")
        if not (callable(self.build) or (isinstance(self.build, str) and ":" in self.build)):
            raise RegistryError(
                f"fixture {self.name!r}: build must be 'module:function' or a callable, "
                f"got {self.build!r}"
            )
        if not isinstance(self.cold_seconds, int | float) or self.cold_seconds < 0:
            raise RegistryError(
                f"fixture {self.name!r}: cold_seconds must be a non-negative number, "
                f"got {self.cold_seconds!r}"
            )
        object.__setattr__(self, "requires", tuple(self.requires))
        object.__setattr__(self, "entries", tuple(self.entries))

    def load_builder(self) -> Callable[[], Any]:
        """Resolve :attr:`build` to a callable."""
        from llmcore.registry import resolve

        return resolve(self.build, f"fixture {self.name!r}: cannot load builder")


def discover(group: str = GROUP) -> dict[str, Fixture]:
    """Every installed package's fixtures by name. A broken entry point, a wrong type or a
    name registered twice raises :class:`RegistryError` naming the entry point."""
    from llmcore.registry import load_entry_points

    found: dict[str, Fixture] = {}
    for ep, obj in load_entry_points(group, Fixture, "fixtures entry point"):
        items = [obj] if isinstance(obj, Fixture) else list(obj)
        dist = ep.dist.name if ep.dist is not None else ep.name
        for fx in items:
            if not isinstance(fx, Fixture):
                raise RegistryError(
                    f"fixtures entry point {ep.name!r} ({ep.value}) must give Fixture objects, "
                    f"got {type(fx).__name__}"
                )
            if fx.name in found:
                raise RegistryError(
                    f"fixture {fx.name!r} is registered twice ({found[fx.name].package} and {dist})"
                )
            found[fx.name] = replace(fx, package=fx.package or dist)
    return dict(sorted(found.items()))


def select(fixtures: dict[str, Fixture], names: Sequence[str] | None = None) -> dict[str, Fixture]:
    """``names`` (fixture names, or package names: distribution, import or folder name; all
    when empty) and everything they require."""
    if not names:
        chosen = list(fixtures)
    else:
        chosen = []
        for n in names:
            hits = [f.name for f in fixtures.values() if n in _aliases(f)]
            if not hits:
                known = ", ".join(fixtures) or "none registered"
                raise ConfigError(f"no fixture or package named {n!r}; known fixtures: {known}")
            chosen += hits
    out: dict[str, Fixture] = {}

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in path:
            raise RegistryError(f"fixtures require each other in a cycle: {' -> '.join(path)}")
        if name not in fixtures:
            raise RegistryError(f"fixture {path[-1]!r} requires {name!r}, which is not registered")
        for r in fixtures[name].requires:
            visit(r, (*path, name))
        out[name] = fixtures[name]

    for n in chosen:
        visit(n, ())
    return out


def _aliases(f: Fixture) -> set[str]:
    """Names that select ``f``: its own, its distribution's, and its package's import or folder
    name (``via_sd`` / ``via-sd``, ``llmcore`` for ``icml26-llmcore``)."""
    names = {f.name, f.package}
    if isinstance(f.build, str):
        top = f.build.split(":", 1)[0].split(".", 1)[0]
        names |= {top, top.replace("_", "-")}
    return names


def priorities(fixtures: dict[str, Fixture]) -> dict[str, float]:
    """Critical-path priority of each fixture: its cold seconds plus the longest chain of
    fixtures (within ``fixtures``) that require it."""
    dependents: dict[str, list[str]] = {n: [] for n in fixtures}
    for f in fixtures.values():
        for r in f.requires:
            if r in dependents:
                dependents[r].append(f.name)
    memo: dict[str, float] = {}

    def prio(n: str) -> float:
        if n not in memo:
            memo[n] = fixtures[n].cold_seconds + max((prio(d) for d in dependents[n]), default=0.0)
        return memo[n]

    return {n: prio(n) for n in fixtures}


@dataclass
class FixtureResult:
    """What the phase did with one fixture."""

    name: str
    package: str
    cold_seconds: float
    seconds: float = 0.0
    status: str = "pending"
    """``built``, ``cached``, ``failed`` or ``skipped``."""
    error: str = ""
    worker: int = field(default=-1, repr=False)


def _status(result: Any) -> str:
    """``built`` or ``cached``; a builder must hand back zoo entries, so that every fixture lives
    in the zoo cache (keyed, locked, listed, cleared) rather than in a private folder."""
    from llmcore.zoo.store import ZooEntry

    items = list(result) if isinstance(result, list | tuple) else [result]
    if not items or not all(isinstance(r, ZooEntry) for r in items):
        got = ", ".join(sorted({type(r).__name__ for r in items})) or "nothing"
        raise ConfigError(
            f"a fixture builder must return the ZooEntry (or a list of them) from zoo.build or "
            f"zoo.cached, got {got}; cache the artefact with llmcore.zoo.cached"
        )
    return "cached" if all(r.from_cache for r in items) else "built"


def _run_one(build: str, name: str) -> tuple[str, float]:
    """Worker body: one torch thread, build, report (status, seconds)."""
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"
    os.environ.setdefault("LLMCORE_ZOO_THREADS", "1")
    # torch reads OMP_NUM_THREADS when it is first imported (by the builder, in this fresh
    # process), so it starts with one thread without being imported here.
    from llmcore.registry import resolve

    t0 = time.perf_counter()
    try:
        result = resolve(build, f"fixture {name!r}: cannot load builder")()
    except BaseException as exc:
        # Re-raise as a plain picklable error carrying the whole traceback text.
        raise RuntimeError(
            f"{type(exc).__name__}: {exc}\n{''.join(traceback.format_exception(exc))}"
        ) from None
    return _status(result), time.perf_counter() - t0


def build_fixtures(
    fixtures: dict[str, Fixture],
    *,
    jobs: int = 2,
    log: TextIO | None = None,
    in_process: bool = False,
) -> list[FixtureResult]:
    """Build ``fixtures`` in ``jobs`` single-thread worker processes (a fresh process per
    fixture), each as soon as what it requires is built, longest chain first. Prints one line
    per fixture as it finishes. Raises :class:`FixtureBuildError` naming every failed fixture
    (fixtures that require a failed one are skipped) after the others have finished.

    ``in_process`` runs the builders one by one in this process (for tests and debugging)."""
    if jobs < 1:
        raise ConfigError(f"jobs must be at least 1, got {jobs}")
    log = log or sys.stderr
    prio = priorities(fixtures)
    results = {n: FixtureResult(n, f.package, f.cold_seconds) for n, f in fixtures.items()}
    done: set[str] = set()
    failed: set[str] = set()
    pending = set(fixtures)
    total = len(fixtures)
    t_start = time.perf_counter()

    def ready() -> list[str]:
        out = [n for n in pending if all(r in done for r in fixtures[n].requires)]
        return sorted(out, key=lambda n: (-prio[n], n))

    def skip_dependents() -> None:
        changed = True
        while changed:
            changed = False
            for n in list(pending):
                if any(r in failed for r in fixtures[n].requires):
                    pending.discard(n)
                    failed.add(n)
                    bad = [r for r in fixtures[n].requires if r in failed]
                    results[n].status = "skipped"
                    results[n].error = f"requires {', '.join(bad)}, which failed"
                    report(results[n])
                    changed = True

    def report(r: FixtureResult) -> None:
        finished = sum(x.status not in ("pending", "running") for x in results.values())
        extra = f": {r.error.splitlines()[0]}" if r.error else ""
        print(
            f"[fixtures {finished}/{total} {time.perf_counter() - t_start:6.0f}s] "
            f"{r.name} ({r.package}) {r.status} in {r.seconds:.1f}s{extra}",
            file=log,
            flush=True,
        )

    def finish(name: str, status: str, seconds: float, error: str = "") -> None:
        r = results[name]
        r.status, r.seconds, r.error = status, seconds, error
        (failed if status == "failed" else done).add(name)
        report(r)
        if status == "failed":
            skip_dependents()

    if in_process:
        while pending:
            queue = ready()
            if not queue:
                break
            n = queue[0]
            pending.discard(n)
            t0 = time.perf_counter()
            try:
                status = _status(fixtures[n].load_builder()())
                finish(n, status, time.perf_counter() - t0)
            except Exception as exc:
                finish(n, "failed", time.perf_counter() - t0, f"{type(exc).__name__}: {exc}")
    else:
        _run_pool(fixtures, jobs, pending, ready, finish)

    bad = [r for r in results.values() if r.status in ("failed", "skipped")]
    ordered = sorted(results.values(), key=lambda r: (-prio[r.name], r.name))
    if bad:
        lines = "\n".join(f"- {r.name} ({r.package}): {r.status}: {r.error}" for r in bad)
        err = FixtureBuildError(f"{len(bad)} of {total} fixtures did not build:\n{lines}")
        err.results = ordered  # type: ignore[attr-defined]
        raise err
    return ordered


def _run_pool(fixtures, jobs, pending, ready, finish) -> None:
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    for f in fixtures.values():
        if not isinstance(f.build, str):
            raise ConfigError(
                f"fixture {f.name!r}: worker processes need build as 'module:function'"
            )
    ctx = mp.get_context("spawn")
    running: dict[Any, tuple[str, float]] = {}
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, max_tasks_per_child=1) as pool:
        while pending or running:
            for n in ready():
                if len(running) >= jobs:
                    break
                pending.discard(n)
                fut = pool.submit(_run_one, fixtures[n].build, n)
                running[fut] = (n, time.perf_counter())
            if not running:
                break  # everything left waits on something that failed (already skipped)
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                n, t0 = running.pop(fut)
                try:
                    status, seconds = fut.result()
                    finish(n, status, seconds)
                except Exception as exc:
                    finish(n, "failed", time.perf_counter() - t0, str(exc))


def summary_rows(results: Iterable[FixtureResult]) -> list[dict[str, Any]]:
    """Table rows: name, package, recorded cold seconds, this run's seconds, status."""
    return [
        {
            "fixture": r.name,
            "package": r.package,
            "cold_s": round(r.cold_seconds, 1),
            "this_run_s": round(r.seconds, 1),
            "status": r.status,
        }
        for r in results
    ]


def entry_packages() -> dict[str, tuple[str, float]]:
    """Zoo entry name -> (package, recorded cold seconds of its fixture), for ``zoo list``."""
    out: dict[str, tuple[str, float]] = {}
    for f in discover().values():
        for e in f.entries or (f.name,):
            out[e] = (f.package, f.cold_seconds)
    return out


def _zoo_builder(name: str) -> Callable[[], Any]:
    def build() -> Any:
        from llmcore import zoo

        return zoo.build(name, progress=False)

    build.__name__ = f"build_{name.replace('-', '_')}"
    return build


build_tiny_llama = _zoo_builder("tiny-llama")
build_tiny_mdlm = _zoo_builder("tiny-mdlm")

#: llmcore's own default-tier fixtures (its tests and the core demo read these two).
BUILTIN = [
    Fixture(
        name="tiny-llama",
        build="llmcore.fixtures:build_tiny_llama",
        cold_seconds=124.0,
        entries=("tiny-llama",),
        package="icml26-llmcore",
        description="Llama 4x128 on the default corpus (llmcore tests, core demo, method demos)",
    ),
    Fixture(
        name="tiny-mdlm",
        build="llmcore.fixtures:build_tiny_mdlm",
        cold_seconds=125.0,
        entries=("tiny-mdlm",),
        package="icml26-llmcore",
        description="LLaDA-style masked diffusion LM on the default corpus",
    ),
]
