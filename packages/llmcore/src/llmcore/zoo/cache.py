"""On-disk cache of zoo models: one ``save_pretrained`` directory per recipe hash."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: Bump when the training code changes in a way that changes weights for the same recipe.
ZOO_FORMAT = 1
ENV_VAR = "LLMCORE_CACHE_DIR"


def cache_root() -> Path:
    """``$LLMCORE_CACHE_DIR`` if set, else the user cache dir (``~/.cache/llmcore``), + ``zoo``."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser() / "zoo"
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("llmcore")) / "zoo"


#: The kernels every fixture gate and claim margin of this project was calibrated with.
REFERENCE_KERNELS = "AVX2/mkl-AVX2"


def cpu_kernels() -> str:
    """The CPU kernel set torch dispatches to (``ATEN_CPU_CAPABILITY``: e.g. ``AVX2``,
    ``AVX512``) and MKL's instruction cap (``MKL_ENABLE_INSTRUCTIONS``, ``native`` if unset).

    Both change float rounding, and a few minutes of training amplify that into different
    weights: the same recipe built on an AVX2 and an AVX512 machine gives different models,
    which may fall on either side of a quality gate. Pinning both to ``AVX2``
    (``ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2``, what the project's nox
    sessions set on x86) gives bit-identical weights across such machines."""
    import torch

    mkl = os.environ.get("MKL_ENABLE_INSTRUCTIONS", "").strip().upper() or "native"
    return f"{torch.backends.cpu.get_cpu_capability()}/mkl-{mkl}"


def on_x86() -> bool:
    """Whether this machine is x86-64, where :func:`pin_reference_kernels` applies."""
    return platform.machine().lower() in {"x86_64", "amd64"}


def pin_reference_kernels() -> str:
    """Ask for the CPU kernels the project's fixtures were calibrated with
    (:data:`REFERENCE_KERNELS`) and return the kernels in effect (:func:`cpu_kernels`).

    On x86 this sets ``ATEN_CPU_CAPABILITY=avx2`` and ``MKL_ENABLE_INSTRUCTIONS=AVX2`` unless
    they are set already (a value of your own wins); elsewhere it changes nothing. torch reads
    its variable at the first CPU kernel it dispatches, so call this before any tensor
    operation (a test suite: at the top of its ``conftest.py``); warns when torch already runs
    other kernels than asked. Child processes inherit the variables.
    """
    if not on_x86():
        return cpu_kernels()
    os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")
    os.environ.setdefault("MKL_ENABLE_INSTRUCTIONS", "AVX2")
    import torch

    asked = os.environ["ATEN_CPU_CAPABILITY"].strip().upper()
    got = torch.backends.cpu.get_cpu_capability()
    if asked not in {got, "DEFAULT", ""}:
        warnings.warn(
            f"asked torch for {asked} CPU kernels but it runs {got}: either this CPU lacks "
            f"them or a tensor operation ran before ATEN_CPU_CAPABILITY was set (set it before "
            f"the first one, e.g. in the environment)",
            RuntimeWarning,
            stacklevel=2,
        )
    return cpu_kernels()


def library_versions() -> dict[str, str]:
    """major.minor of the libraries whose numerics determine the trained weights, and the CPU
    kernels they run (:func:`cpu_kernels`)."""
    import tokenizers
    import torch
    import transformers

    def mm(v: str) -> str:
        return ".".join(v.split("+")[0].split(".")[:2])

    return {
        "torch": mm(torch.__version__),
        "transformers": mm(transformers.__version__),
        "tokenizers": mm(tokenizers.__version__),
        "cpu_kernels": cpu_kernels(),
        "zoo_format": str(ZOO_FORMAT),
    }


def recipe_key(material: dict[str, Any]) -> str:
    """sha256 over the recipe's key material and :func:`library_versions`."""
    blob = json.dumps({"recipe": material, "versions": library_versions()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def entry_dir(name: str, key: str) -> Path:
    return cache_root() / f"{name}-{key[:16]}"


@contextlib.contextmanager
def build_lock(path: Path) -> Iterator[None]:
    """Exclusive inter-process lock so two processes never build the same entry at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def install(tmp: Path, final: Path) -> None:
    """Move a fully written temp directory into place (atomic rename on one filesystem)."""
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)


def _used_file(path: Path) -> Path:
    """The ``<entry>.used`` file beside the entry folder ``path``."""
    return path.with_name(path.name + ".used")


def mark_used(path: Path) -> None:
    """Record that the cache entry at ``path`` was used now (a ``<entry>.used`` file beside it;
    best effort: a read-only cache is left as it is). :func:`clear` can then drop the entries no
    run has used for a while."""
    with contextlib.suppress(OSError):
        _used_file(path).touch()


def last_used(path: Path) -> float:
    """When the entry at ``path`` was last used (:func:`mark_used`) or else built, as a POSIX
    timestamp (0.0 if unknown)."""
    for f in (_used_file(path), path / "zoo.json"):
        try:
            return f.stat().st_mtime
        except OSError:
            continue
    return 0.0


def list_entries() -> list[dict[str, Any]]:
    """Metadata (``zoo.json``) of every complete cache entry, with its ``path`` and
    ``last_used`` time (see :func:`last_used`)."""
    root = cache_root()
    out = []
    if root.exists():
        for d in sorted(root.iterdir()):
            meta = d / "zoo.json"
            if d.is_dir() and not d.name.startswith(".") and meta.exists():
                info = json.loads(meta.read_text())
                info["path"] = str(d)
                info["last_used"] = last_used(d)
                out.append(info)
    return out


def select_entries(name: str | None = None, *, unused_days: float | None = None) -> list[Path]:
    """Entry folders :func:`clear` would delete with the same arguments."""
    import time

    root = cache_root()
    if not root.exists():
        return []
    if unused_days is not None and unused_days < 0:
        from llmcore.errors import ConfigError

        raise ConfigError(f"unused_days must be >= 0, got {unused_days}")
    if unused_days is None:
        return sorted(
            d
            for d in root.iterdir()
            if d.is_dir()
            and not d.name.startswith(".")
            and (name is None or d.name.rsplit("-", 1)[0] == name)
        )
    cutoff = time.time() - 86400 * unused_days
    return [
        Path(info["path"])
        for info in list_entries()
        if (name is None or info.get("name") == name) and info["last_used"] < cutoff
    ]


def clear(name: str | None = None, *, unused_days: float | None = None) -> int:
    """Delete cache entries and return how many: all, or those of recipe ``name``; with
    ``unused_days`` only those no run has loaded (or built) for that many days, e.g. the
    entries left behind when a code or version change gave their recipes new keys."""
    paths = select_entries(name, unused_days=unused_days)
    for d in paths:
        shutil.rmtree(d)
        _used_file(d).unlink(missing_ok=True)
    return len(paths)
