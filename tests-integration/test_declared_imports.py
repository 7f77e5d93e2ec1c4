"""Every third-party module a package imports is one it declares (a dependency or an extra).

A package that imports something only because a sibling or the core happens to pull it in
breaks the day that dependency moves; users installing the package alone find out first.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").exists())
CORE = "icml26-llmcore"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _project(pkg: Path) -> dict:
    return tomllib.loads((pkg / "pyproject.toml").read_text())["project"]


def _requirements(pkg: Path) -> list[str]:
    proj = _project(pkg)
    reqs = list(proj.get("dependencies", []))
    for extra in proj.get("optional-dependencies", {}).values():
        reqs += extra
    return reqs


def declared(pkg: Path) -> set[str]:
    """Distributions ``pkg`` declares, plus those of the core extras it names (``icml26-llmcore[x]``
    declares x's dependencies on the package's behalf); the core's plain dependencies do not count."""
    from packaging.requirements import Requirement

    core_extras = _project(ROOT / "packages/llmcore").get("optional-dependencies", {})
    out: set[str] = set()
    for text in _requirements(pkg):
        req = Requirement(text)
        out.add(_norm(req.name))
        if _norm(req.name) == CORE:
            for extra in req.extras:
                out |= {_norm(Requirement(r).name) for r in core_extras.get(extra, [])}
    return out


def imported_modules(src: Path) -> dict[str, str]:
    """Top-level absolute imports of every module under ``src`` -> first file:line seen."""
    found: dict[str, str] = {}
    for file in sorted(src.rglob("*.py")):
        tree = ast.parse(file.read_text(), filename=str(file))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                found.setdefault(top, f"{file.relative_to(src.parent)}:{node.lineno}")
    return found


#: Import names that differ from their distribution's name, for optional dependencies that the
#: integration environment does not install (installed ones are looked up in their metadata).
KNOWN_DISTRIBUTIONS = {
    "sklearn": "scikit-learn",
    "yaml": "pyyaml",
    "PIL": "pillow",
    "cv2": "opencv-python",
    "google": "protobuf",
}


def distribution_of(module: str) -> set[str]:
    dists = packages_distributions().get(module)
    if dists:
        return {_norm(d) for d in dists}
    return {_norm(KNOWN_DISTRIBUTIONS.get(module, module))}


@pytest.mark.parametrize("pkg", PACKAGES, ids=lambda p: p.name)
def test_every_third_party_import_is_declared(pkg: Path) -> None:
    own = {p.name.replace("-", "_") for p in PACKAGES}
    allowed = declared(pkg) | {_norm(_project(pkg)["name"])}
    problems = []
    for module, where in sorted(imported_modules(pkg / "src").items()):
        if module in sys.stdlib_module_names or module == "__future__":
            continue
        if module in own and module not in ("llmcore", pkg.name.replace("-", "_")):
            problems.append(f"{where}: imports sibling package {module!r}")
            continue
        if module == "llmcore":
            module_dists = {CORE}
        elif module == pkg.name.replace("-", "_"):
            continue
        else:
            module_dists = distribution_of(module)
        if not module_dists & allowed:
            problems.append(f"{where}: imports {module!r} ({'/'.join(sorted(module_dists))})")
    assert not problems, f"{pkg.name} imports what it does not declare:\n" + "\n".join(problems)


def test_the_checker_catches_an_undeclared_import(tmp_path: Path) -> None:
    src = tmp_path / "src" / "demo_pkg"
    src.mkdir(parents=True)
    (src / "mod.py").write_text("import os\nimport yaml\nfrom numpy import array\n")
    mods = imported_modules(tmp_path / "src")
    assert set(mods) == {"os", "yaml", "numpy"}
    assert "pyyaml" in distribution_of("yaml")
    # installed or not (an extra the integration environment leaves out), sklearn is scikit-learn
    assert distribution_of("sklearn") == {"scikit-learn"}
