"""Cached artefacts of the zoo: one directory per (name, key), built once per machine.

:func:`cached` is the single flow every cached artefact goes through: a zoo recipe
(:func:`llmcore.zoo.build`), a derived checkpoint a method package trains from one (a fine-tuned
target, an unlearning baseline, a rotated model), or a method run whose result a test reads. It
takes a lock, builds into a temporary folder, writes ``zoo.json`` metadata and installs the folder
atomically, so a crash never leaves a half-built entry and two processes never build the same
entry at once. Every entry shows up in ``llmcore zoo list`` and goes with ``llmcore zoo clear``.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from llmcore.errors import ConfigError, QualityGateError
from llmcore.zoo.cache import (
    REFERENCE_KERNELS,
    build_lock,
    cache_root,
    cpu_kernels,
    entry_dir,
    install,
    library_versions,
    mark_used,
    on_x86,
    recipe_key,
)

log = logging.getLogger(__name__)


@dataclass
class ZooEntry:
    """A built (cached) zoo artefact: a directory plus the metrics its build recorded."""

    name: str
    path: Path
    key: str
    metrics: dict[str, Any] = field(default_factory=dict)
    build_seconds: float = 0.0
    from_cache: bool = False
    load_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra ``from_pretrained`` arguments the entry's model needs (e.g.
    ``attn_implementation``), recorded at build time and applied by :meth:`load`."""

    def load(self, *, device: str | None = "cpu", dtype: Any = "float32", **kwargs: Any):
        """``(model, tokenizer)`` through :func:`llmcore.models.load_causal_lm` /
        :func:`~llmcore.models.load_tokenizer` (for entries that hold a saved model)."""
        from llmcore.models import load_causal_lm, load_tokenizer

        model = load_causal_lm(
            self.path, device=device, dtype=dtype, **{**self.load_kwargs, **kwargs}
        )
        return model, load_tokenizer(self.path)


def _entry(meta: dict[str, Any], path: Path, from_cache: bool) -> ZooEntry:
    if from_cache:
        mark_used(path)
    return ZooEntry(
        meta["name"],
        path,
        meta["key"],
        meta.get("metrics", {}),
        meta.get("build_seconds", 0.0),
        from_cache,
        meta.get("load_kwargs", {}),
    )


def _note_kernels(exc: BaseException) -> None:
    """On x86, add to a quality-gate failure that the build ran other CPU kernels than this
    project's gates were calibrated with, and how to pin them (the gate may hold with those)."""
    if not isinstance(exc, QualityGateError) or not on_x86():
        return
    kernels = cpu_kernels()
    if kernels != REFERENCE_KERNELS:
        exc.add_note(
            f"this build ran CPU kernels {kernels}; the quality gates of this project's "
            f"fixtures were calibrated with {REFERENCE_KERNELS}, and other kernels train other "
            "weights: call llmcore.zoo.pin_reference_kernels() before the first tensor "
            "operation (or start Python with ATEN_CPU_CAPABILITY=avx2 "
            "MKL_ENABLE_INSTRUCTIONS=AVX2) to build what they were calibrated on"
        )


def _key(name: str, material: Mapping[str, Any]) -> str:
    if not name or "/" in name or name.startswith("."):
        raise ConfigError(f"a zoo entry name must be a plain folder name, got {name!r}")
    try:
        return recipe_key(dict(material))
    except TypeError as exc:
        raise ConfigError(
            f"the key material of zoo entry {name!r} must be JSON-serialisable ({exc}); pass "
            "plain values (dataclasses through dataclasses.asdict, paths as strings)"
        ) from None


def lookup(name: str, material: Mapping[str, Any]) -> ZooEntry | None:
    """The cached entry for ``(name, material)`` if it is built, else ``None`` (never builds)."""
    final = entry_dir(name, _key(name, material))
    meta = final / "zoo.json"
    if not meta.exists():
        return None
    return _entry(json.loads(meta.read_text()), final, True)


def cached(
    name: str,
    material: Mapping[str, Any],
    make: Callable[[Path], Mapping[str, Any] | None],
    *,
    force: bool = False,
    progress: bool = True,
    description: str = "",
    load_kwargs: Mapping[str, Any] | None = None,
) -> ZooEntry:
    """Build an artefact once per ``material`` and return its cache entry.

    ``material`` (JSON-serialisable) is everything that determines the artefact: recipe fields,
    seeds, the keys of the entries it derives from, and :func:`code_digest` of the code that
    makes it. It is hashed with the torch/transformers/tokenizers versions into the key.
    ``make(tmp_dir)`` writes the artefact into ``tmp_dir`` and returns its metrics (or None);
    if it raises, nothing is cached and the error propagates. Concurrent calls for one key wait
    on a file lock and the later ones load the finished entry.
    """
    key = _key(name, material)
    final = entry_dir(name, key)
    with build_lock(final):
        if (final / "zoo.json").exists() and not force:
            return _entry(json.loads((final / "zoo.json").read_text()), final, True)
        if progress:
            print(f"llmcore.zoo: building {name} ({key[:12]}) ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{name}-"))
        try:
            metrics = dict(make(tmp) or {})
            seconds = time.perf_counter() - t0
            meta = {
                "name": name,
                "key": key,
                "description": description,
                "recipe": dict(material),
                "versions": library_versions(),
                "metrics": metrics,
                "build_seconds": seconds,
                "load_kwargs": dict(load_kwargs or {}),
            }
            (tmp / "zoo.json").write_text(json.dumps(meta, indent=2, default=str))
            install(tmp, final)
        except BaseException as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            _note_kernels(exc)
            raise
    if progress:
        print(f"llmcore.zoo: built {name} in {seconds:.0f} s", file=sys.stderr, flush=True)
    log.info("built zoo entry %s in %.1fs", name, seconds)
    return _entry(meta, final, False)


def _module_files(mod: ModuleType | str) -> list[Path]:
    if isinstance(mod, str):
        mod = importlib.import_module(mod)
    file = inspect.getsourcefile(mod)
    if file is None:
        raise ConfigError(f"module {mod.__name__!r} has no source file to digest")
    path = Path(file)
    if path.name == "__init__.py":  # a package: every module in it
        return sorted(path.parent.rglob("*.py"))
    return [path]


def code_digest(*modules: ModuleType | str) -> str:
    """sha256 (16 hex digits) over the source of ``modules`` (module objects or dotted names;
    a package means all its ``.py`` files). Put it in the material of a cached method run or
    derived checkpoint, so that editing the code that makes it rebuilds it."""
    if not modules:
        raise ConfigError("code_digest() needs at least one module")
    h = hashlib.sha256()
    for mod in modules:
        for path in _module_files(mod):
            h.update(path.name.encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def artifact_dir(namespace: str) -> Path:
    """A per-namespace folder for a package's non-model artefacts (judge caches, run outputs),
    beside the zoo under ``$LLMCORE_CACHE_DIR`` (or the user cache dir); created if missing.
    Use :func:`cached` instead for anything keyed by its inputs."""
    if not namespace or "/" in namespace or namespace.startswith("."):
        raise ConfigError(f"namespace must be a plain folder name, got {namespace!r}")
    path = cache_root().parent / "artifacts" / namespace
    path.mkdir(parents=True, exist_ok=True)
    return path


__all__ = ["ZooEntry", "artifact_dir", "cached", "code_digest", "lookup"]
