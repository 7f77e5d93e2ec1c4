"""Every check is a nox session; CI only calls nox.

Sessions are discovered from ``packages/*`` so a new package needs no edit here:

- ``tests(package=X)``: fresh venv with only X and its dependencies, installed from local paths
  with workspace sources off (``--no-sources``, as a pip user gets them), then X's tests.
- ``build(package=X)``: ``uv build`` X (and the core) to wheels, install the wheels into a clean
  venv, run ``X --help``.
- ``integration``: every package from the lock (``uv sync --locked --all-packages``),
  runs ``tests-integration/``.
- ``lint``: ruff check, ruff format --check, and a schema check of the CI workflow.

Versions in the per-package venvs are constrained to ``uv.lock`` (``uv export``), so every
session tests the same torch/transformers the lock pins and reuses uv's cache.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv"
nox.options.reuse_venv = "no"
nox.options.error_on_missing_interpreters = True

ROOT = Path(__file__).parent
PACKAGES_DIR = ROOT / "packages"
CORE = "llmcore"


def _pyproject(folder: str) -> dict:
    return tomllib.loads((PACKAGES_DIR / folder / "pyproject.toml").read_text())


PACKAGES = sorted(p.name for p in PACKAGES_DIR.iterdir() if (p / "pyproject.toml").exists())
DIST_TO_FOLDER = {_pyproject(p)["project"]["name"]: p for p in PACKAGES}


def _req_name(req: str) -> str:
    import re

    return re.split(r"[\s\[<>=!~;]", req, maxsplit=1)[0].lower()


def _local_closure(folder: str) -> list[str]:
    """``folder`` and the workspace packages it depends on (transitively), core first."""
    seen: list[str] = []

    def visit(f: str) -> None:
        for req in _pyproject(f)["project"].get("dependencies", []):
            dep = DIST_TO_FOLDER.get(_req_name(req))
            if dep and dep not in seen:
                visit(dep)
        if f not in seen:
            seen.append(f)

    visit(folder)
    return seen


def _test_requirements(folder: str) -> list[str]:
    return _pyproject(folder).get("dependency-groups", {}).get("test", ["pytest>=8"])


def _constraints(session: nox.Session) -> str:
    """Pins from uv.lock (every package and extra) as a constraints file."""
    out = Path(session.create_tmp()) / "constraints.txt"
    session.run_install(
        "uv",
        "export",
        "--locked",
        "--all-packages",
        "--all-extras",
        "--all-groups",
        "--no-hashes",
        "--no-emit-workspace",
        "--no-header",
        "--no-annotate",
        "--output-file",
        str(out),
        "--quiet",
        external=True,
    )
    return str(out)


@nox.session
@nox.parametrize("package", PACKAGES)
def tests(session: nox.Session, package: str) -> None:
    """One package alone, installed from its path with workspace sources off."""
    paths = [str(PACKAGES_DIR / f) for f in _local_closure(package)]
    session.install(
        "--no-sources", "-c", _constraints(session), *paths, *_test_requirements(package)
    )
    session.chdir(PACKAGES_DIR / package)
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *session.posargs)


@nox.session
@nox.parametrize("package", PACKAGES)
def build(session: nox.Session, package: str) -> None:
    """Build wheels with ``--no-sources`` and install them, outside the workspace."""
    dist = Path(session.create_tmp()) / "dist"
    for f in _local_closure(package):
        session.run(
            "uv",
            "build",
            "--no-sources",
            "--wheel",
            "--out-dir",
            str(dist),
            str(PACKAGES_DIR / f),
            "--quiet",
            external=True,
        )
    wheels = sorted(str(w) for w in dist.glob("*.whl"))
    session.install("-c", _constraints(session), *wheels)
    session.chdir(session.create_tmp())  # import from the venv, not the source tree
    session.run(package, "--help")
    session.run("python", "-c", f"import {package.replace('-', '_')} as m; print(m.__version__)")


@nox.session
def integration(session: nox.Session) -> None:
    """All packages together from the lock."""
    session.run_install(
        "uv",
        "sync",
        "--locked",
        "--all-packages",
        "--group",
        "dev",
        env={"UV_PROJECT_ENVIRONMENT": session.virtualenv.location},
        external=True,
    )
    session.run(
        "python",
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests-integration",
        *session.posargs,
    )


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check, ruff format --check, and the CI workflow against its JSON schema."""
    session.install("-c", _constraints(session), "ruff", "check-jsonschema")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run(
        "check-jsonschema",
        "--builtin-schema",
        "vendor.github-workflows",
        *map(str, sorted((ROOT / ".github" / "workflows").glob("*.yml"))),
    )
