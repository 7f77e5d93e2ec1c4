"""The ``llmcore`` command (installed methods, their demos, the tiny-model zoo) and
:func:`run_main`, the entry-point wrapper that gives every package's CLI one error policy.

``--help`` imports neither torch nor transformers; commands import what they need.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from llmcore.errors import LLMCoreError

Handler = Callable[[argparse.Namespace], "int | None"]


def run_main(
    prog: str,
    parser: argparse.ArgumentParser | Callable[[], argparse.ArgumentParser],
    argv: Sequence[str] | None = None,
    *,
    handler: Handler | None = None,
    user_errors: tuple[type[BaseException], ...] = (LLMCoreError,),
) -> int:
    """Parse ``argv``, run the chosen command and apply the one error policy of every CLI.

    ``parser`` is a parser or a zero-argument function building one. The command is
    ``args.func(args)`` (set per subcommand with ``set_defaults(func=...)``), else
    ``handler(args)``; its return value is the exit status (``None`` means 0).

    Policy: an error of a ``user_errors`` class (default: any :class:`LLMCoreError`, from which
    every package's error hierarchy derives) prints ``prog: error: <message>`` to stderr and
    returns 2, the status argparse uses for bad flags; ``KeyboardInterrupt`` prints
    ``prog: interrupted`` and returns 130 (128 + SIGINT, the shell convention); anything else is
    a bug and propagates with its traceback. argparse's own exits (``--help``, bad flags) raise
    ``SystemExit`` as usual. Use as ``raise SystemExit(run_main("tool", build_parser, argv))``.
    """
    try:
        p = parser if isinstance(parser, argparse.ArgumentParser) else parser()
        args = p.parse_args(argv)
        func = getattr(args, "func", None) or handler
        if func is None:
            raise TypeError(
                f"{prog}: the parsed arguments have no 'func' and no handler was given: call "
                "set_defaults(func=...) on every subcommand (with required=True subparsers) "
                "or pass handler="
            )
        status = func(args)
    except user_errors as exc:
        print(f"{prog}: error: {str(exc) or type(exc).__name__}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    return 0 if status is None else int(status)


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return n


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def print_table(rows: list[dict[str, Any]], *, file=None) -> None:
    """Print dict rows as an aligned text table (columns in first-seen order)."""
    file = file or sys.stdout
    if not rows:
        print("(no rows)", file=file)
        return
    cols: list[str] = []
    for r in rows:
        cols += [c for c in r if c not in cols]
    cells = [[_fmt(r.get(c, "")) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)), file=file)
    print("  ".join("-" * w for w in widths), file=file)
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)), file=file)


def _cmd_list(args: argparse.Namespace) -> int:
    from llmcore.registry import discover

    methods = discover()
    if args.json:
        print(json.dumps({n: {"paper": m.paper, "summary": m.summary} for n, m in methods.items()}))
        return 0
    if not methods:
        print("no method packages installed (pip install one, e.g. 'pip install via-sd')")
        return 0
    print_table([{"method": n, "paper": m.paper, "summary": m.summary} for n, m in methods.items()])
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from llmcore.registry import discover, get_method
    from llmcore.runtime import setup_logging

    setup_logging("WARNING")
    if args.name and args.name != "llmcore":
        targets = [(args.name, get_method(args.name).load_demo())]
    else:
        from llmcore.demo import run as core_demo

        targets = [("llmcore", core_demo)]
        if args.all or not args.name:
            targets += [(n, m.load_demo()) for n, m in discover().items()]
    if targets[0][0] == "llmcore":
        _prebuild_core_models()
    rows, failed = [], 0
    for name, fn in targets:
        print(f"== {name} demo", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            result = fn()
            rows.append({"method": name, **result})
        except LLMCoreError as exc:
            failed += 1
            rows.append({"method": name, "error": str(exc)})
        rows[-1].setdefault("seconds", time.perf_counter() - t0)
    # Methods report different metrics, so the table is long: one line per (method, metric).
    print_table(
        [
            {"method": r["method"], "metric": k, "value": v}
            for r in rows
            for k, v in r.items()
            if k != "method"
        ]
    )
    if args.json_out:
        from llmcore.data import atomic_write_json

        atomic_write_json(args.json_out, rows)
    return 1 if failed else 0


def _prebuild_core_models() -> None:
    """Build the core's zoo models (which the core demo and several method demos reuse) side by
    side on up to two cores when they are not cached yet: about half the cold wait."""
    import os

    from llmcore.fixtures import BUILTIN, build_fixtures
    from llmcore.zoo.cache import list_entries

    built = {e.get("name") for e in list_entries()}
    todo = {f.name: f for f in BUILTIN if not set(f.entries) <= built}
    jobs = min(len(todo), os.cpu_count() or 1, 2)
    if jobs > 1:
        print(
            f"building the core's tiny models ({', '.join(todo)}) on {jobs} cores, once",
            file=sys.stderr,
            flush=True,
        )
        build_fixtures(todo, jobs=jobs)


def _entry_row(
    e: dict[str, Any], owners: dict[str, tuple[str, float]] | None = None
) -> dict[str, Any]:
    """One cache entry as a table row; entries written by method packages' own builders may
    lack some fields, which show as blanks."""
    m = e.get("metrics", {})
    package, _ = (owners or {}).get(e.get("name", ""), ("", 0.0))
    return {
        "name": e.get("name", "?"),
        "package": package,
        "key": str(e.get("key", ""))[:16],
        "eval_loss": m.get("eval_loss", ""),
        "params": int(m["n_params"]) if "n_params" in m else "",
        "cold_s": round(e["build_seconds"], 1) if "build_seconds" in e else "",
        "last_used": _day(e.get("last_used", 0.0)),
        "path": e["path"],
    }


def _day(ts: float) -> str:
    import datetime

    if not ts:
        return ""
    return datetime.datetime.fromtimestamp(ts, tz=datetime.UTC).strftime("%Y-%m-%d")


def _cmd_zoo(args: argparse.Namespace) -> int:
    from llmcore import zoo

    if args.zoo_cmd == "list":
        entries = zoo.list_entries()
        print(f"cache: {zoo.cache_root()}")
        built = {e["name"] for e in entries}
        rows = [{"recipe": n, "built": n in built} for n in zoo.recipe_names()]
        print_table(rows)
        from llmcore.fixtures import discover, entry_packages

        fixtures = discover()
        owners = entry_packages()
        if entries:
            print()
            print_table([_entry_row(e, owners) for e in entries])
        if fixtures:
            print()
            print_table(
                [
                    {
                        "fixture": f.name,
                        "package": f.package,
                        "cold_s (recorded)": f.cold_seconds,
                        "requires": ",".join(f.requires),
                        "built": all(e in built for e in (f.entries or (f.name,))),
                    }
                    for f in fixtures.values()
                ]
            )
        return 0
    if args.zoo_cmd == "clear":
        from llmcore.zoo.cache import select_entries

        how = {"unused_days": args.unused_days}
        if args.dry_run:
            paths = select_entries(args.name, **how)
            for path in paths:
                print(path)
            n, verb = len(paths), "would remove"
        else:
            n, verb = zoo.clear(args.name, **how), "removed"
        print(f"{verb} {n} cache entr{'y' if n == 1 else 'ies'} from {zoo.cache_root()}")
        return 0
    if args.fixtures:
        return _build_fixtures(args)
    # build
    from tqdm.auto import tqdm

    names = args.names or zoo.recipe_names()
    rows = []
    for name in tqdm(names, desc="zoo build", unit="recipe"):
        t0 = time.perf_counter()
        entry = zoo.build(name, force=args.force)
        rows.append(
            {
                "recipe": name,
                "cached": entry.from_cache,
                "eval_loss": entry.metrics["eval_loss"],
                "params": int(entry.metrics["n_params"]),
                "build_s": entry.build_seconds,
                "this_run_s": time.perf_counter() - t0,
                "path": str(entry.path),
            }
        )
    print_table(rows)
    return 0


def _build_fixtures(args: argparse.Namespace) -> int:
    from llmcore.data import atomic_write_json
    from llmcore.fixtures import FixtureBuildError, build_fixtures, discover, select, summary_rows
    from llmcore.zoo.cache import REFERENCE_KERNELS, pin_reference_kernels

    kernels = pin_reference_kernels()  # the kernels the fixtures' gates were calibrated with
    chosen = select(discover(), args.names)
    print(
        f"building {len(chosen)} fixtures with {args.jobs} single-thread workers "
        f"(cache: {_cache_root()}; CPU kernels {kernels})",
        file=sys.stderr,
        flush=True,
    )
    t0 = time.perf_counter()
    try:
        results = build_fixtures(chosen, jobs=args.jobs)
        exc = None
    except FixtureBuildError as err:
        results, exc = err.results, err  # type: ignore[attr-defined]
    wall = time.perf_counter() - t0
    rows = summary_rows(results)
    print_table(rows)
    counts = {s: sum(r["status"] == s for r in rows) for s in ("built", "cached")}
    print(
        f"fixtures: {len(rows)} in {wall:.0f}s wall; built {counts['built']}, "
        f"cached {counts['cached']}, "
        f"failed {len(rows) - sum(counts.values())}"
    )
    if args.json_out:
        atomic_write_json(args.json_out, {"wall_seconds": wall, "fixtures": rows})
    if exc is not None:
        if kernels != REFERENCE_KERNELS:
            print(
                f"note: these fixtures were built with CPU kernels {kernels}; their quality "
                f"gates were calibrated with {REFERENCE_KERNELS}, and other kernels train other "
                "weights. This command pins them on x86 unless ATEN_CPU_CAPABILITY or "
                "MKL_ENABLE_INSTRUCTIONS is set already: unset both (or set them to avx2 / AVX2) "
                "to reproduce the calibrated builds.",
                file=sys.stderr,
            )
        raise exc
    return 0


def _cache_root() -> str:
    from llmcore.zoo.cache import cache_root

    return str(cache_root())


def build_parser() -> argparse.ArgumentParser:
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("icml26-llmcore")
    except PackageNotFoundError:
        ver = "unknown"
    p = argparse.ArgumentParser(
        prog="llmcore",
        description="Shared core of the ICML 2026 method packages: installed methods, their "
        "demos, and the tiny-model zoo.",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {ver}")
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("list", help="list installed method packages")
    s.add_argument("--json", action="store_true", help="print JSON instead of a table")
    s.set_defaults(func=_cmd_list)

    s = sub.add_parser("demo", help="run demos on the tiny defaults and print a results table")
    s.add_argument(
        "name",
        nargs="?",
        help="one method ('llmcore' for the core alone); "
        "default: the core and every installed method",
    )
    s.add_argument("--all", action="store_true", help="the core and every installed method")
    s.add_argument("--json-out", help="also write the table as JSON to this path")
    s.set_defaults(func=_cmd_demo)

    s = sub.add_parser("zoo", help="build, list or clear the tiny-model zoo cache")
    zsub = s.add_subparsers(dest="zoo_cmd", required=True)
    b = zsub.add_parser("build", help="build (or load from cache) zoo recipes, timing each")
    b.add_argument(
        "names",
        nargs="*",
        help="recipes to build (default: all); with --fixtures, fixture or package names",
    )
    b.add_argument("--force", action="store_true", help="rebuild even if cached")
    b.add_argument(
        "--fixtures",
        action="store_true",
        help="build the installed packages' registered test fixtures (entry-point group "
        "'llmcore.fixtures') instead of zoo recipes, longest chain first",
    )
    b.add_argument(
        "--jobs",
        type=_positive_int,
        default=2,
        help="with --fixtures: parallel single-thread worker processes (default: 2)",
    )
    b.add_argument("--json-out", help="with --fixtures: also write the summary as JSON here")
    zsub.add_parser("list", help="show recipes and cache entries")
    c = zsub.add_parser("clear", help="delete cache entries")
    c.add_argument("name", nargs="?", help="only this recipe's entries")
    c.add_argument(
        "--unused-days",
        type=float,
        metavar="N",
        help="only entries no run has loaded or built for N days (the cache records each use)",
    )
    c.add_argument("--dry-run", action="store_true", help="list what would be removed")
    s.set_defaults(func=_cmd_zoo)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``llmcore`` console script."""
    return run_main("llmcore", build_parser, argv)


if __name__ == "__main__":
    raise SystemExit(main())
