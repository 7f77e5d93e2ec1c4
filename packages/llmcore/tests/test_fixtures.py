"""The ``llmcore.fixtures`` registry and the fixture phase (``llmcore zoo build --fixtures``).

A throw-away distribution (a ``*.dist-info`` folder with an ``entry_points.txt``) is put on
``sys.path``, so the fixtures are found through the real entry-point machinery, and the phase
runs them in real spawned worker processes.
"""

from __future__ import annotations

import io
import os

import pytest

from llmcore.errors import ConfigError, RegistryError
from llmcore.fixtures import (
    Fixture,
    FixtureBuildError,
    build_fixtures,
    discover,
    priorities,
    select,
)

MODULE = """
from llmcore.fixtures import Fixture


def _recipe():
    from llmcore.zoo import Corpus, ModelSpec, Recipe, TokenizerSpec, TrainSpec

    docs = [f"{a}+{b}={a + b}" for a in range(30) for b in range(10)]
    return Recipe(
        "fakefx-shared",
        Corpus.from_texts("fakefx", docs),
        tokenizer=TokenizerSpec(vocab_size=264),
        model=ModelSpec(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32),
        train=TrainSpec(steps=3, batch_size=4, warmup_steps=1, max_length=16),
        max_eval_loss=100.0,
    )


def build_shared():
    from llmcore import zoo

    return zoo.build(_recipe(), progress=False)


def build_bad():
    raise ValueError("deliberately broken builder")


def build_plain():
    from llmcore import zoo

    return zoo.cached("fakefx-plain", {"v": 1}, lambda tmp: {"ok": 1.0}, progress=False)


def build_private():
    return "/some/private/folder"


FIXTURES = [
    Fixture("fakefx-a", "fakefx_mod:build_shared", cold_seconds=5, entries=("fakefx-shared",)),
    Fixture("fakefx-b", "fakefx_mod:build_shared", cold_seconds=4, entries=("fakefx-shared",)),
    Fixture("fakefx-bad", "fakefx_mod:build_bad", cold_seconds=1),
    Fixture("fakefx-after-bad", "fakefx_mod:build_plain", cold_seconds=1, requires=("fakefx-bad",)),
    Fixture("fakefx-light", "fakefx_mod:build_plain", cold_seconds=1, entries=("fakefx-shared",)),
    Fixture("fakefx-private", "fakefx_mod:build_private", cold_seconds=1),
]
"""


@pytest.fixture
def fake_dist(tmp_path, monkeypatch):
    """A distribution ``fakefx`` registering four fixtures under ``llmcore.fixtures``."""
    (tmp_path / "fakefx_mod.py").write_text(MODULE)
    info = tmp_path / "fakefx-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakefx\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[llmcore.fixtures]\nfakefx = fakefx_mod:FIXTURES\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("LLMCORE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def _fx(name, cold, requires=()):
    return Fixture(name, lambda: _entry(False), cold_seconds=cold, requires=requires)


def _entry(from_cache: bool):
    from pathlib import Path

    from llmcore.zoo import ZooEntry

    return ZooEntry("x", Path("."), "k", from_cache=from_cache)


def test_discover_finds_fixtures_through_the_entry_point(fake_dist):
    found = discover()
    mine = {n: f for n, f in found.items() if f.package == "fakefx"}
    assert set(mine) == {
        "fakefx-a",
        "fakefx-b",
        "fakefx-bad",
        "fakefx-after-bad",
        "fakefx-light",
        "fakefx-private",
    }
    assert mine["fakefx-after-bad"].requires == ("fakefx-bad",)


def test_installed_packages_register_their_fixtures():
    """llmcore registers its own built-ins; every registered builder resolves."""
    found = discover()
    assert {"tiny-llama", "tiny-mdlm"} <= set(found)
    assert found["tiny-llama"].package == "icml26-llmcore"
    for f in found.values():
        assert callable(f.load_builder()), f.name


def test_duplicate_and_malformed_registrations_are_errors(fake_dist):
    extra = fake_dist / "fakefx2-0.1.dist-info"
    extra.mkdir()
    (extra / "METADATA").write_text("Metadata-Version: 2.1\nName: fakefx2\nVersion: 0.1\n")
    (extra / "entry_points.txt").write_text("[llmcore.fixtures]\nfakefx2 = fakefx_mod:FIXTURES\n")
    with pytest.raises(RegistryError, match="registered twice"):
        discover()
    with pytest.raises(RegistryError, match="module:function"):
        Fixture("x", "no_colon", cold_seconds=1)
    with pytest.raises(RegistryError, match="cold_seconds"):
        Fixture("x", "m:f", cold_seconds=-1)


def test_priorities_follow_the_longest_chain():
    fx = {
        "a": _fx("a", 10),
        "b": _fx("b", 100, requires=("a",)),
        "c": _fx("c", 50),
        "d": _fx("d", 5, requires=("b",)),
    }
    p = priorities(fx)
    assert p == {"a": 115, "b": 105, "c": 50, "d": 5}


def test_select_adds_requirements_and_rejects_unknown_and_cycles():
    fx = {"a": _fx("a", 1), "b": _fx("b", 1, requires=("a",)), "c": _fx("c", 1)}
    assert list(select(fx, ["b"])) == ["a", "b"]
    assert set(select(fx, None)) == {"a", "b", "c"}
    with pytest.raises(ConfigError, match="no fixture or package named 'zzz'"):
        select(fx, ["zzz"])
    cyc = {"a": _fx("a", 1, requires=("b",)), "b": _fx("b", 1, requires=("a",))}
    with pytest.raises(RegistryError, match="cycle"):
        select(cyc, None)
    with pytest.raises(RegistryError, match="not registered"):
        select({"a": _fx("a", 1, requires=("ghost",))}, None)


def test_in_process_order_is_longest_chain_first():
    order: list[str] = []

    def mk(name, cold, requires=()):
        return Fixture(
            name,
            lambda: order.append(name) or _entry(True),
            cold_seconds=cold,
            requires=requires,
        )

    fx = {
        "short": mk("short", 1),
        "root": mk("root", 2),
        "long": mk("long", 60, requires=("root",)),
        "mid": mk("mid", 30),
    }
    out = build_fixtures(fx, in_process=True, log=io.StringIO())
    assert order == ["root", "long", "mid", "short"]
    assert {r.status for r in out} == {"cached"}


def test_phase_builds_a_shared_entry_once_and_names_a_failing_builder(fake_dist):
    """Two spawned workers: fakefx-a and fakefx-b want the same zoo entry (the zoo's lock makes
    one build it and the other load it); fakefx-bad raises, so the phase fails naming it, and
    fakefx-after-bad, which requires it, is skipped."""
    fx = {
        n: f
        for n, f in discover().items()
        if f.package == "fakefx" and n not in ("fakefx-light", "fakefx-private")
    }
    log = io.StringIO()
    with pytest.raises(FixtureBuildError) as info:
        build_fixtures(fx, jobs=2, log=log)
    msg = str(info.value)
    assert "fakefx-bad" in msg and "deliberately broken builder" in msg
    status = {r.name: r.status for r in info.value.results}
    assert sorted([status["fakefx-a"], status["fakefx-b"]]) == ["built", "cached"]
    assert status["fakefx-bad"] == "failed"
    assert status["fakefx-after-bad"] == "skipped"
    lines = log.getvalue().splitlines()
    assert len(lines) == 4 and all(line.startswith("[fixtures ") for line in lines)


def test_cli_builds_fixtures_and_lists_packages(fake_dist, capsys, monkeypatch):
    """``zoo build --fixtures`` (worker processes that import no torch, so it stays quick),
    its JSON summary and exit codes, and ``zoo list`` naming a cache entry's package."""
    import json

    from llmcore.cli import main

    out_json = fake_dist / "summary.json"
    argv = ["zoo", "build", "--fixtures", "fakefx-light", "--jobs", "1", "--json-out"]
    assert main([*argv, str(out_json)]) == 0
    assert "fakefx-light" in capsys.readouterr().out
    rows = json.loads(out_json.read_text())["fixtures"]
    assert [(r["fixture"], r["package"], r["status"]) for r in rows] == [
        ("fakefx-light", "fakefx", "built")
    ]
    # an entry as the zoo writes it: `zoo list` names the package that registered it
    entry = fake_dist / "cache" / "zoo" / "fakefx-shared-0123456789abcdef"
    entry.mkdir(parents=True)
    (entry / "zoo.json").write_text(
        json.dumps({"name": "fakefx-shared", "key": "0123456789abcdef", "build_seconds": 12.5})
    )
    assert main(["zoo", "list"]) == 0
    listing = capsys.readouterr().out
    row = next(line for line in listing.splitlines() if line.startswith("fakefx-shared"))
    assert row.split()[1] == "fakefx" and "12.5" in row
    # a failing fixture: exit code 2 and its name on stderr
    from llmcore.zoo.cache import REFERENCE_KERNELS

    bad = ["zoo", "build", "--fixtures", "fakefx-bad", "--jobs", "1"]
    monkeypatch.setattr("llmcore.zoo.cache.cpu_kernels", lambda: REFERENCE_KERNELS)
    assert main(bad) == 2
    err = capsys.readouterr().err
    assert "fakefx-bad" in err and f"CPU kernels {REFERENCE_KERNELS}" in err
    assert "ATEN_CPU_CAPABILITY" not in err
    # built with other kernels than the gates were calibrated with: the failure says so
    monkeypatch.setattr("llmcore.zoo.cache.cpu_kernels", lambda: "AVX512/mkl-native")
    assert main(bad) == 2
    err = capsys.readouterr().err
    assert "CPU kernels AVX512/mkl-native" in err
    assert "ATEN_CPU_CAPABILITY or MKL_ENABLE_INSTRUCTIONS is set already" in err
    # the command pins the calibrated kernels itself (on x86, unless the user set them)
    import platform

    if platform.machine().lower() in {"x86_64", "amd64"}:
        monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
        monkeypatch.delenv("MKL_ENABLE_INSTRUCTIONS", raising=False)
        assert main(bad) == 2
        assert os.environ["ATEN_CPU_CAPABILITY"] == "avx2"
        assert os.environ["MKL_ENABLE_INSTRUCTIONS"] == "AVX2"


def test_a_fixture_outside_the_zoo_fails_the_phase(fake_dist):
    """Every fixture must be served by zoo.build/zoo.cached: a builder handing back a private
    folder fails with a message saying so."""
    fx = {n: f for n, f in discover().items() if n == "fakefx-private"}
    with pytest.raises(FixtureBuildError) as info:
        build_fixtures(fx, jobs=1, log=io.StringIO(), in_process=True)
    assert "must return the ZooEntry" in str(info.value)
