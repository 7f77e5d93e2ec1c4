"""The ``llmcore.methods`` entry-point group: each method package registers itself.

A method package declares in its ``pyproject.toml``::

    [project.entry-points."llmcore.methods"]
    via-sd = "via_sd:METHOD"

where ``METHOD = MethodInfo(name="via-sd", paper=..., summary=..., demo="via_sd.demo:run")``.
Loading is lazy and side-effect free: ``demo`` is a ``"module:function"`` string (or a callable)
resolved only when the demo runs.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from llmcore.errors import RegistryError

GROUP = "llmcore.methods"
_NAME_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


@dataclass(frozen=True)
class MethodInfo:
    """What a method package tells llmcore about itself."""

    name: str
    """Distribution-style name, e.g. ``via-sd``."""
    paper: str
    """Paper title (and venue)."""
    summary: str
    """One line: what the method does."""
    demo: str | Callable[..., dict[str, Any]]
    """``"module:function"`` (or the callable) that runs the method on its tiny default and
    returns a flat ``{metric: value}`` dict for the results table."""
    package: str = ""
    """Distribution name when it differs from ``name``."""
    tags: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not _NAME_RE.match(self.name):
            raise RegistryError(
                f"method name {self.name!r} must be lowercase words joined by '-' (e.g. 'via-sd')"
            )
        if not self.paper or not self.summary:
            raise RegistryError(f"method {self.name!r} needs a paper title and a summary")
        if not (callable(self.demo) or (isinstance(self.demo, str) and ":" in self.demo)):
            raise RegistryError(
                f"method {self.name!r}: demo must be a callable or 'module:function', "
                f"got {self.demo!r}"
            )

    def load_demo(self) -> Callable[..., dict[str, Any]]:
        """Resolve :attr:`demo` to a callable."""
        return resolve(self.demo, f"method {self.name!r}: cannot load demo")


def resolve(ref: str | Callable[..., Any], what: str) -> Callable[..., Any]:
    """A ``"module:function"`` reference (or a callable, returned as is) resolved to the
    callable; a missing module or attribute raises :class:`RegistryError` starting with
    ``what``."""
    if callable(ref):
        return ref
    mod, _, fn = ref.partition(":")
    try:
        return getattr(importlib.import_module(mod), fn)
    except (ImportError, AttributeError) as exc:
        raise RegistryError(f"{what} {ref!r}: {exc}") from exc


def load_entry_points(
    group: str, kind: type, label: str = "entry point"
) -> Iterator[tuple[EntryPoint, Any]]:
    """Each entry point of ``group`` with what it points at; a factory (a callable that is not
    a ``kind``) is called. One that fails to load raises :class:`RegistryError` naming it."""
    for ep in entry_points(group=group):
        try:
            obj = ep.load()
        except Exception as exc:
            raise RegistryError(f"{label} {ep.name!r} ({ep.value}) failed to load: {exc}") from exc
        if callable(obj) and not isinstance(obj, kind):
            obj = obj()
        yield ep, obj


def discover(group: str = GROUP) -> dict[str, MethodInfo]:
    """All installed methods by name. A broken or duplicate registration raises
    :class:`RegistryError` naming the entry point, rather than being skipped silently."""
    found: dict[str, MethodInfo] = {}
    for ep, info in load_entry_points(group, MethodInfo):
        if not isinstance(info, MethodInfo):
            raise RegistryError(
                f"entry point {ep.name!r} ({ep.value}) must point at a MethodInfo, "
                f"got {type(info).__name__}"
            )
        if info.name != ep.name:
            raise RegistryError(
                f"entry point {ep.name!r} registers a method named {info.name!r}; they must match"
            )
        if info.name in found:
            raise RegistryError(f"method {info.name!r} is registered twice")
        found[info.name] = info
    return dict(sorted(found.items()))


def get_method(name: str) -> MethodInfo:
    """One installed method by name (RegistryError listing the installed ones otherwise)."""
    methods = discover()
    if name not in methods:
        known = ", ".join(methods) or "none installed"
        raise RegistryError(f"no method named {name!r} is installed; installed: {known}")
    return methods[name]
