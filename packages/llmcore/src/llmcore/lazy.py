"""Lazy exports for package ``__init__`` files (PEP 562 module ``__getattr__``/``__dir__``).

A package re-exports its public names without importing the submodules that define them, so
``import pkg`` stays cheap (no torch) and ``pkg.Name`` imports ``pkg.sub`` on first use::

    __getattr__, __dir__ = lazy_exports(__name__, {"Name": ".sub", "alias": ".sub:real_name"})

This module imports nothing heavy.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from llmcore.errors import ConfigError

__all__ = ["lazy_exports"]


def lazy_exports(
    module_name: str, mapping: Mapping[str, str], *, submodules: Iterable[str] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for module ``module_name`` (pass ``__name__``).

    ``mapping`` maps a public name to ``"module"`` (the attribute of the same name in that
    module) or ``"module:attr"`` (attribute ``attr``); a module path starting with ``.`` is
    relative to the package ``module_name``. ``submodules`` lists submodule names exposed as
    attributes themselves (``pkg.zoo`` -> ``pkg.zoo`` module). The first access imports the
    module and stores the value in the package's globals, so later accesses are plain lookups;
    an unknown name raises ``AttributeError`` (so ``hasattr`` works), an import failure (e.g. a
    missing optional dependency) propagates unchanged. ``__dir__`` lists the module's globals
    and every lazy name. Malformed entries raise :class:`~llmcore.errors.ConfigError` at once.
    """
    targets: dict[str, tuple[str, str | None]] = {}
    for name, spec in mapping.items():
        module, sep, attr = spec.partition(":") if isinstance(spec, str) else ("", "", "")
        if not module or module.strip(".") == "" or (sep and not attr.isidentifier()):
            raise ConfigError(
                f"lazy export {name!r} of {module_name!r}: expected 'module' or "
                f"'module:attr' (module may start with '.'), got {spec!r}"
            )
        targets[name] = (module, attr or name)
    for sub in submodules:
        if sub in targets:
            raise ConfigError(f"{module_name!r}: {sub!r} is both a lazy export and a submodule")
        targets[sub] = ("." + sub, None)

    def _package() -> str:
        mod = sys.modules.get(module_name)
        if mod is None or hasattr(mod, "__path__"):
            return module_name
        return module_name.rpartition(".")[0]

    def __getattr__(name: str) -> Any:
        try:
            module_path, attr = targets[name]
        except KeyError:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}") from None
        module = importlib.import_module(
            module_path, package=_package() if module_path.startswith(".") else None
        )
        if attr is None:
            value: Any = module
        else:
            try:
                value = getattr(module, attr)
            except AttributeError:
                raise AttributeError(
                    f"module {module_name!r} exports {name!r} from {module.__name__!r}, "
                    f"which has no attribute {attr!r}"
                ) from None
        owner = sys.modules.get(module_name)
        if owner is not None:
            setattr(owner, name, value)  # cache: later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        owner = sys.modules.get(module_name)
        return sorted(set(vars(owner) if owner is not None else ()) | set(targets))

    return __getattr__, __dir__
