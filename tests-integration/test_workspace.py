"""All workspace packages installed together (from the lock): they import, their CLIs answer
``--help``, and every method package is registered with llmcore under its own name."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").exists())


def _project(pkg: Path) -> dict:
    return tomllib.loads((pkg / "pyproject.toml").read_text())["project"]


@pytest.mark.parametrize("pkg", PACKAGES, ids=lambda p: p.name)
def test_package_imports_and_cli_helps(pkg: Path) -> None:
    import importlib

    module = importlib.import_module(pkg.name.replace("-", "_"))
    assert module.__version__ == _project(pkg)["version"]
    # The interpreter's own scripts folder first: pytest run as `.venv/bin/python -m pytest`
    # without the venv on PATH must still find the venv's console scripts.
    exe = shutil.which(pkg.name, path=str(Path(sys.executable).parent)) or shutil.which(pkg.name)
    assert exe, f"console script {pkg.name!r} is not installed"
    out = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_every_method_package_is_registered() -> None:
    from llmcore.registry import discover

    methods = discover()
    expected = {p.name for p in PACKAGES if p.name != "llmcore"}
    assert set(methods) == expected
    for name, info in methods.items():
        assert callable(info.load_demo()), name


@pytest.mark.parametrize("pkg", [p for p in PACKAGES if p.name != "llmcore"], ids=lambda p: p.name)
def test_method_depends_on_core_with_compatible_range(pkg: Path) -> None:
    """Each method pins the core to the workspace's 0.x minor series (a floor inside it is fine:
    a package may need a 0.2.y feature), and the workspace's own core satisfies the range."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    core = Version(
        tomllib.loads((ROOT / "packages/llmcore/pyproject.toml").read_text())["project"]["version"]
    )
    reqs = [Requirement(d) for d in _project(pkg)["dependencies"]]
    spec = next((r.specifier for r in reqs if r.name == "icml26-llmcore"), None)
    assert spec is not None, f"{pkg.name} does not depend on icml26-llmcore"
    assert core in spec, f"{pkg.name} requires icml26-llmcore{spec}, the workspace has {core}"
    floor = min(Version(s.version) for s in spec if s.operator == ">=")
    assert Version(f"{core.major}.{core.minor}.0") <= floor, f"{pkg.name}: floor {floor} is old"
    assert Version(f"{core.major}.{core.minor + 1}") not in spec, f"{pkg.name}: {spec} is open"


@pytest.mark.parametrize("pkg", PACKAGES, ids=lambda p: p.name)
def test_package_ships_the_licence(pkg: Path) -> None:
    """Every distribution names its licence and ships the repository's LICENSE text."""
    proj = _project(pkg)
    assert proj.get("license") == "Apache-2.0", pkg.name
    assert "LICENSE" in proj.get("license-files", []), pkg.name
    assert (pkg / "LICENSE").read_text() == (ROOT / "LICENSE").read_text(), pkg.name
    for extra in proj["license-files"]:
        assert (pkg / extra).exists(), f"{pkg.name}: {extra} is listed but missing"
