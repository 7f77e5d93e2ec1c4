"""Config dataclasses as command-line flags, merged with a ``--config file.yaml`` (TRL style).

Precedence: dataclass defaults < values from ``--config`` < flags given on the command line.
Field docs come from ``field(metadata={"help": ...})`` (peft/TRL convention).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar, Union

from llmcore.errors import ConfigError

T = TypeVar("T")


def _base_type(tp: Any) -> tuple[Any, bool]:
    """(inner type, optional?) for ``X | None``."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def _parse_bool(text: str) -> bool:
    low = text.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean (true/false), got {text!r}")


def add_dataclass_arguments(
    parser: argparse.ArgumentParser, cls: type, *, prefix: str = ""
) -> argparse.ArgumentParser:
    """Add one ``--field-name`` flag per dataclass field (defaults are left to
    :func:`parse_config`, so a flag overrides the YAML only when it is given)."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        tp, _ = _base_type(hints[f.name])
        flag = "--" + prefix + f.name.replace("_", "-")
        help_ = f.metadata.get("help", "")
        default = _default(f)
        if default is not dataclasses.MISSING:
            help_ = f"{help_} (default: {default!r})".strip()
        kw: dict[str, Any] = {"dest": prefix + f.name, "default": argparse.SUPPRESS, "help": help_}
        origin = typing.get_origin(tp)
        if tp is bool:
            kw.update(type=_parse_bool, nargs="?", const=True, metavar="BOOL")
        elif origin in (list, tuple):
            (inner, *_) = typing.get_args(tp) or (str,)
            kw.update(type=inner if inner in (int, float, str) else str, nargs="*")
        elif origin is typing.Literal:
            kw.update(choices=typing.get_args(tp))
        elif tp in (int, float, str):
            kw.update(type=tp)
        elif tp is Path:
            kw.update(type=Path)
        else:
            kw.update(type=json.loads, help=f"{help_} [JSON]")
        parser.add_argument(flag, **kw)
    return parser


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML (or JSON) mapping of field names to values."""
    import yaml

    p = Path(path)
    if not p.exists():
        raise ConfigError(f"config file {str(p)!r} does not exist")
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {str(p)!r} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(p)!r} must hold a mapping, got {type(data).__name__}")
    return data


def config_from_dict(cls: type[T], values: dict[str, Any], *, source: str = "config") -> T:
    """Build ``cls`` from a mapping, refusing unknown keys with the list of known ones.
    Validation in the dataclass's ``__post_init__`` applies as usual."""
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ConfigError(
            f"{source}: unknown field(s) {unknown} for {cls.__name__}; known: {sorted(names)}"
        )
    hints = typing.get_type_hints(cls)
    coerced = {}
    for k, v in values.items():
        tp, _ = _base_type(hints[k])
        if typing.get_origin(tp) is tuple and isinstance(v, list):
            v = tuple(v)
        coerced[k] = v
    try:
        return cls(**coerced)
    except TypeError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def parse_config(cls: type[T], argv: Sequence[str] | None = None, *, prog: str | None = None) -> T:
    """Parse ``argv`` into a ``cls`` instance: ``--config file.yaml`` then flags."""
    parser = argparse.ArgumentParser(prog=prog, description=(cls.__doc__ or "").strip())
    parser.add_argument("--config", type=Path, help="YAML file with field values")
    add_dataclass_arguments(parser, cls)
    ns = parser.parse_args(argv)
    return namespace_to_config(cls, ns)


def namespace_to_config(cls: type[T], ns: argparse.Namespace, *, prefix: str = "") -> T:
    """Merge ``ns.config`` (if any) with the flags present in ``ns`` into a ``cls``."""
    values: dict[str, Any] = {}
    cfg = getattr(ns, "config", None)
    if cfg:
        values.update(load_config_file(cfg))
    for f in dataclasses.fields(cls):
        if hasattr(ns, prefix + f.name):
            values[f.name] = getattr(ns, prefix + f.name)
    return config_from_dict(cls, values, source=str(cfg) if cfg else "flags")


def config_to_dict(cfg: Any) -> dict[str, Any]:
    """Dataclass to a plain (YAML/JSON-ready) dict; tuples become lists, Paths strings."""

    def plain(v: Any) -> Any:
        if isinstance(v, tuple | list):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, Path):
            return str(v)
        return v

    return {k: plain(v) for k, v in dataclasses.asdict(cfg).items()}


def save_config(cfg: Any, path: str | Path) -> None:
    """Write a config dataclass to YAML (round-trips through :func:`load_config_file`)."""
    import yaml

    from llmcore.data import atomic_write_text

    atomic_write_text(path, yaml.safe_dump(config_to_dict(cfg), sort_keys=False))
