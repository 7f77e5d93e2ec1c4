"""The CI run behind ``nox`` (session ``ci``): lint, fixture phase, two lanes, integration.

1. ``nox -s lint``.
2. ``nox -s fixtures -- --jobs 2``: every registered test fixture, built on both cores.
3. Each package's ``tests`` and ``build`` sessions, in ``--lanes`` parallel lanes balanced by
   ``.ci/durations.json`` (greedy, longest first; a package missing from the file goes to the
   lane that is shorter at that point). Each lane runs one session at a time with one torch
   thread per process and streams its output to ``<log dir>/lane-<i>.log``; every log is
   printed whole once the lanes are done.
4. ``nox -s integration``.
5. The cache audit: after the suite, every file this run wrote under the model cache must be
   in the zoo (``<cache>/zoo/<name>-<key>/`` with its ``zoo.json``) or under
   ``<cache>/artifacts/``; a package that caches a model in a private folder fails the run.

Every step runs even when an earlier one failed, so one run reports everything; the exit code
is non-zero if anything failed. At the end a table lists each session with its lane, wall
seconds and result, and the fixture phase's built and cached counts. ``--durations-out FILE``
writes the measured seconds per package in the format of ``.ci/durations.json``.

Run it as CI does: ``uv run --locked --only-group dev nox`` (``ci`` is the default session).
Standard library only, so it runs before any environment exists.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DURATIONS = ROOT / ".ci" / "durations.json"
#: Seconds assumed for a package the durations file does not know (about a package's budget).
UNKNOWN_SECONDS = 180.0


def packages(root: Path = ROOT) -> list[str]:
    """Package folders under ``packages/`` (those with a ``pyproject.toml``), sorted."""
    return sorted(p.name for p in (root / "packages").iterdir() if (p / "pyproject.toml").exists())


def load_durations(path: Path = DURATIONS) -> dict[str, float]:
    """``{package: seconds}`` from the committed durations file (empty if it is missing)."""
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    return {str(k): float(v) for k, v in data.get("packages", {}).items()}


def balance(
    names: Sequence[str], durations: Mapping[str, float], lanes: int = 2
) -> list[list[str]]:
    """Split ``names`` into ``lanes`` lists of about equal total duration.

    Greedy longest-processing-time first: known packages in decreasing duration (ties by name)
    each go to the lane with the smallest total so far (ties to the lower index); then unknown
    packages, by name, each to the then-shortest lane, counted as :data:`UNKNOWN_SECONDS`.
    Deterministic; every name lands in exactly one lane; a lane keeps the order it was given."""
    if lanes < 1:
        raise ValueError(f"lanes must be at least 1, got {lanes}")
    if len(set(names)) != len(names):
        raise ValueError(f"package names repeat: {sorted(names)}")
    known = sorted((n for n in names if n in durations), key=lambda n: (-durations[n], n))
    unknown = sorted(n for n in names if n not in durations)
    out: list[list[str]] = [[] for _ in range(lanes)]
    load = [0.0] * lanes
    for n in [*known, *unknown]:
        i = min(range(lanes), key=lambda k: (load[k], k))
        out[i].append(n)
        load[i] += durations.get(n, UNKNOWN_SECONDS)
    return out


@dataclass
class Step:
    session: str
    lane: str
    seconds: float = 0.0
    result: str = "not run"


def _nox(session: str, *posargs: str) -> list[str]:
    cmd = [sys.executable, "-m", "nox", "-s", session]
    return [*cmd, "--", *posargs] if posargs else cmd


def _run(cmd: list[str], log, env: Mapping[str, str]) -> tuple[int, float]:
    t0 = time.perf_counter()
    log.write(f"\n$ {' '.join(cmd)}\n")
    log.flush()
    proc = subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=dict(env))
    return proc.returncode, time.perf_counter() - t0


def _step(session: str, lane: str, cmd: list[str], log, env, lock=None) -> Step:
    code, secs = _run(cmd, log, env)
    step = Step(session, lane, secs, "passed" if code == 0 else f"FAILED ({code})")
    msg = f"[ci {time.strftime('%H:%M:%S')}] {session}: {step.result} in {secs:.0f}s ({lane})"
    if lock:
        with lock:
            print(msg, flush=True)
    else:
        print(msg, flush=True)
    return step


def _stream_step(session: str, cmd: list[str], env) -> Step:
    """A serial step whose output goes straight to stdout."""
    print(f"\n===== {session}", flush=True)
    return _step(session, "serial", cmd, sys.stdout, env)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lanes", type=int, default=2, help="parallel lanes (default 2)")
    ap.add_argument("--jobs", type=int, default=2, help="fixture-phase workers (default 2)")
    ap.add_argument("--log-dir", default=str(ROOT / ".ci-logs"), help="where lane logs go")
    ap.add_argument("--durations-out", help="write measured per-package seconds here")
    ap.add_argument(
        "--only", nargs="*", help="only these packages and their fixtures (default: all)"
    )
    ap.add_argument(
        "--skip", nargs="*", default=[], help="steps to skip: lint fixtures integration"
    )
    args = ap.parse_args(argv)

    t_start = time.perf_counter()
    started = time.time() - 1.0  # file mtimes have coarse resolution on some filesystems
    log_dir = Path(args.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    # One torch (OpenMP/MKL) thread per process: two lanes share two cores.
    env.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "LLMCORE_ZOO_THREADS": "1"})
    env.setdefault("PYTHONUNBUFFERED", "1")
    steps: list[Step] = []

    if "lint" not in args.skip:
        steps.append(_stream_step("lint", _nox("lint"), env))

    fixture_summary = None
    if "fixtures" not in args.skip:
        summary_path = log_dir / "fixtures.json"
        summary_path.unlink(missing_ok=True)
        steps.append(
            _stream_step(
                "fixtures",
                _nox(
                    "fixtures",
                    *(args.only or []),
                    "--jobs",
                    str(args.jobs),
                    "--json-out",
                    str(summary_path),
                ),
                env,
            )
        )
        if summary_path.exists():
            fixture_summary = json.loads(summary_path.read_text())

    names = args.only or packages()
    lanes = balance(names, load_durations(), args.lanes)
    print("\n===== lanes", flush=True)
    for i, lane in enumerate(lanes, 1):
        print(f"lane {i}: {', '.join(lane) or '(empty)'}", flush=True)
    lock = threading.Lock()
    lane_steps: list[list[Step]] = [[] for _ in lanes]
    per_package: dict[str, float] = {}

    def run_lane(i: int, lane: list[str]) -> None:
        with open(log_dir / f"lane-{i + 1}.log", "w") as log:
            for pkg in lane:
                total = 0.0
                for kind in ("tests", "build"):
                    session = f"{kind}(package='{pkg}')"
                    st = _step(session, f"lane {i + 1}", _nox(session), log, env, lock)
                    lane_steps[i].append(st)
                    total += st.seconds
                per_package[pkg] = round(total, 1)

    threads = [
        threading.Thread(target=run_lane, args=(i, lane), daemon=True)
        for i, lane in enumerate(lanes)
    ]
    t_lanes = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lanes_wall = time.perf_counter() - t_lanes
    for i in range(len(lanes)):
        print(f"\n===== lane {i + 1} log ({log_dir / f'lane-{i + 1}.log'})", flush=True)
        print((log_dir / f"lane-{i + 1}.log").read_text(), flush=True)
        steps += lane_steps[i]

    if "integration" not in args.skip:
        steps.append(_stream_step("integration", _nox("integration"), env))

    root = cache_dir()
    entries, problems = audit_cache(root, started)
    print(f"\n===== cache audit ({root})", flush=True)
    print(f"{len(entries)} zoo entries: {', '.join(entries) or '(none)'}")
    for line in problems:
        print(line)
    steps.append(Step("cache-audit", "serial", 0.0, "passed" if not problems else "FAILED"))

    if args.durations_out:
        Path(args.durations_out).write_text(
            json.dumps({"packages": dict(sorted(per_package.items()))}, indent=2) + "\n"
        )
    wall = time.perf_counter() - t_start
    _print_table(steps)
    print(f"\nlanes: {lanes_wall:.0f}s wall for {len(names)} packages in {len(lanes)} lanes")
    if fixture_summary is not None:
        rows = fixture_summary["fixtures"]
        counts = {s: sum(r["status"] == s for r in rows) for s in ("built", "cached")}
        print(
            f"fixture phase: {len(rows)} fixtures, built {counts['built']}, cached "
            f"{counts['cached']}, {fixture_summary['wall_seconds']:.0f}s wall"
        )
    failed = [s for s in steps if s.result != "passed"]
    print(f"ci wall time: {wall:.0f}s")
    # The plain closing line: sessions, not tests (each session's pytest line is in the logs).
    print(f"sessions: {len(steps) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


def cache_dir() -> Path:
    """The model cache llmcore uses: ``$LLMCORE_CACHE_DIR``, else the user cache dir."""
    env = os.environ.get("LLMCORE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "llmcore"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llmcore"


def audit_cache(root: Path, since: float) -> tuple[list[str], list[str]]:
    """``(zoo entries, problems)``: the complete zoo entries under ``root``, and every file
    modified at or after ``since`` (epoch seconds) that is neither in a complete zoo entry nor
    under ``artifacts/`` (older files are left to their owners: a cache outlives versions)."""
    entries: list[str] = []
    problems: list[str] = []
    if not root.exists():
        return entries, problems
    zoo = root / "zoo"
    for child in sorted(root.iterdir()):
        if child.name in ("zoo", "artifacts"):
            continue
        for f in [child] if child.is_file() else sorted(child.rglob("*")):
            if f.is_file() and f.stat().st_mtime >= since:
                problems.append(f"written outside the zoo: {f}")
    if zoo.exists():
        for d in sorted(zoo.iterdir()):
            if not d.is_dir() or d.name.startswith("."):
                continue  # lock files; a build's temporary folder
            if (d / "zoo.json").exists():
                entries.append(d.name)
            elif d.stat().st_mtime >= since:
                problems.append(f"zoo folder without zoo.json (not made by zoo.cached): {d}")
    return entries, problems


def _print_table(steps: list[Step]) -> None:
    rows = [("session", "lane", "wall_s", "result")] + [
        (s.session, s.lane, f"{s.seconds:.0f}", s.result) for s in steps
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    print()
    for j, r in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
        if j == 0:
            print("  ".join("-" * w for w in widths))


if __name__ == "__main__":
    raise SystemExit(main())
