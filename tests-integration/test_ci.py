"""CI's own machinery: the lane balancer (``.ci/lanes.py``), the default test tier's marker
selection (the ``tests`` nox session collects no ``extended`` or ``perf`` test), and every
package's fixture registration."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def lanes():
    return _load(ROOT / ".ci" / "lanes.py", "ci_lanes")


@pytest.fixture(scope="module")
def noxfile():
    return _load(ROOT / "noxfile.py", "ci_noxfile")


def test_balance_is_greedy_longest_first_and_deterministic(lanes):
    d = {"a": 100, "b": 90, "c": 50, "d": 40, "e": 10}
    out = lanes.balance(list("edcba"), d, 2)
    assert out == [["a", "d", "e"], ["b", "c"]]
    assert out == lanes.balance(list("abcde"), d, 2)
    totals = [sum(d[n] for n in lane) for lane in out]
    assert max(totals) - min(totals) <= max(d.values())


def test_balance_puts_every_package_in_exactly_one_lane(lanes):
    names = [f"p{i}" for i in range(20)]
    d = {n: float(i * 7 % 13 + 1) for i, n in enumerate(names[:15])}
    for k in (1, 2, 3):
        out = lanes.balance(names, d, k)
        assert len(out) == k
        flat = [n for lane in out for n in lane]
        assert sorted(flat) == sorted(names)


def test_unknown_packages_go_to_the_shorter_lane(lanes):
    d = {"big": 300, "small": 100}
    out = lanes.balance(["big", "small", "new1", "new2"], d, 2)
    # big | small; new1 (counted as UNKNOWN_SECONDS = 180) joins the shorter lane (100 s),
    # and new2 too, since 280 s is still shorter than 300 s.
    assert out == [["big"], ["small", "new1", "new2"]]
    with pytest.raises(ValueError):
        lanes.balance(["a", "a"], {}, 2)
    with pytest.raises(ValueError):
        lanes.balance(["a"], {}, 0)


def test_committed_durations_cover_every_package(lanes):
    known = lanes.load_durations()
    missing = set(lanes.packages()) - set(known)
    assert not missing, f"add measured seconds for {sorted(missing)} to .ci/durations.json"
    assert json.loads((ROOT / ".ci" / "durations.json").read_text())["packages"]


def _collect(package: str, *marker_args: str) -> set[str]:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            *marker_args,
        ],
        cwd=ROOT / "packages" / package,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode in (0, 5), out.stdout + out.stderr
    return {line for line in out.stdout.splitlines() if "::" in line}


def _with_both_tiers() -> list[str]:
    found = []
    for pkg in sorted((ROOT / "packages").iterdir()):
        text = "".join(p.read_text() for p in (pkg / "tests").glob("test_*.py"))
        if "mark.extended" in text and "mark.perf" in text:
            found.append(pkg.name)
    return found


def test_default_tier_collects_no_extended_or_perf_test(noxfile):
    """Collect with the marker expression the ``tests`` session passes, on a package that has
    both opt-in tiers: nothing marked ``extended`` or ``perf`` is left, and something is."""
    packages = _with_both_tiers()
    assert packages, "no package has both extended and perf tests to check against"
    pkg = packages[0]
    default = _collect(pkg, "-m", noxfile.default_marker_expression())
    extended = _collect(pkg, "-m", "extended")
    perf = _collect(pkg, "-m", "perf")
    assert default and extended and perf
    assert not default & (extended | perf)


def test_every_method_package_registers_fixtures():
    """Each package whose tests read a cached fixture registers it for the fixture phase."""
    from llmcore.fixtures import discover

    packages = {f.package for f in discover().values()}
    expected = {
        "icml26-llmcore",
        "nara-peft",
        "respin-quant",
        "spec-align",
        "unlearn-leakk",
        "via-sd",
    }
    assert expected <= packages


def test_cache_audit_flags_files_written_outside_the_zoo(lanes, tmp_path):
    import os
    import time

    since = time.time() - 1
    (tmp_path / "zoo" / "tiny-abc").mkdir(parents=True)
    (tmp_path / "zoo" / "tiny-abc" / "zoo.json").write_text("{}")
    (tmp_path / "zoo" / "tiny-abc.lock").write_text("")
    (tmp_path / "zoo" / ".tiny-building").mkdir()
    (tmp_path / "artifacts" / "pkg").mkdir(parents=True)
    (tmp_path / "artifacts" / "pkg" / "run.json").write_text("{}")
    entries, problems = lanes.audit_cache(tmp_path, since)
    assert entries == ["tiny-abc"] and problems == []
    old = tmp_path / "old-private" / "model.bin"
    old.parent.mkdir()
    old.write_text("x")
    os.utime(old, (since - 3600, since - 3600))  # left by an older version: not this run's
    assert lanes.audit_cache(tmp_path, since)[1] == []
    (tmp_path / "my-pkg").mkdir()
    (tmp_path / "my-pkg" / "model.safetensors").write_text("x")
    (tmp_path / "zoo" / "half-built").mkdir()
    problems = lanes.audit_cache(tmp_path, since)[1]
    assert len(problems) == 2
    assert "outside the zoo" in problems[0] and "without zoo.json" in problems[1]
