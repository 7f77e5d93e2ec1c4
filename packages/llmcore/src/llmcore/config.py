"""Config dataclasses as command-line flags, merged with a ``--config`` file (TRL style).

Precedence: dataclass defaults < values from the ``--config`` file < flags typed on the command
line. Every generated flag defaults to ``argparse.SUPPRESS``, so a flag the user did not type is
absent from the namespace and never clobbers a file value.

Field help comes from ``field(metadata={"help": ...})`` (peft/TRL convention) or, failing that,
from the attribute docstring written on the line under the field. Values from files and flags
are checked against the field's annotation (``int``, ``float``, ``bool``, ``str``, ``Path``,
``Literal``, ``X | None``, ``list``/``tuple``, nested dataclasses) and a mismatch is a
:class:`~llmcore.errors.ConfigError` naming the field and where the value came from.

Nested dataclass fields: in a file, a mapping (checked recursively); on the command line one
JSON flag for the whole field, merged key by key over the file's mapping. Flags stay flat.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import itertools
import json
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePath
from typing import Any, TypeVar, Union

from llmcore.errors import ConfigError, LLMCoreError

T = TypeVar("T")

_NONE_WORDS = ("none", "null")


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


class _OrNone:
    """argparse ``type=`` for an optional field: ``none``/``null`` give ``None``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.__name__ = getattr(inner, "__name__", "value")  # argparse's error messages use it

    def __call__(self, text: str) -> Any:
        return None if text.lower() in _NONE_WORDS else self.inner(text)


def _field_docs(cls: type) -> dict[str, str]:
    """Attribute docstrings (a string literal right under ``name: type = ...``) of a dataclass
    and its dataclass bases, read from the source; empty when the source is unavailable."""
    import ast
    import inspect
    import textwrap

    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        if not tree.body or not isinstance(tree.body[0], ast.ClassDef):
            continue
        body = tree.body[0].body
        for prev, node in itertools.pairwise(body):
            if (
                isinstance(prev, ast.AnnAssign)
                and isinstance(prev.target, ast.Name)
                and isinstance(node, ast.Expr)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                docs[prev.target.id] = " ".join(node.value.value.split())
    return docs


def _show(value: Any) -> str:
    if isinstance(value, PurePath):
        return str(value)
    return repr(value)


def _flag_name(prefix: str, name: str) -> str:
    return "--" + prefix + name.replace("_", "-")


def add_dataclass_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    cls: type,
    *,
    prefix: str = "",
    negative_flags: bool = False,
) -> argparse.ArgumentParser | argparse._ArgumentGroup:
    """Add one ``--field-name`` flag per init field of dataclass ``cls``.

    Flags default to ``argparse.SUPPRESS`` (defaults are applied by :func:`config_from_args`),
    so a flag overrides a config file only when it is typed. ``bool`` fields take
    ``--x`` / ``--x false`` (and ``--no-x`` with ``negative_flags``); ``list``/``tuple`` fields
    take several values; ``Literal`` fields list their choices; optional fields accept
    ``none``; other types take JSON. Help text shows the field's help and ``default: X``.
    """
    hints = typing.get_type_hints(cls)
    docs: dict[str, str] | None = None
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        tp, optional = _base_type(hints[f.name])
        flag = _flag_name(prefix, f.name)
        help_ = f.metadata.get("help", "")
        if not help_:
            docs = _field_docs(cls) if docs is None else docs
            help_ = docs.get(f.name, "")
        default = _default(f)
        if default is not dataclasses.MISSING:
            help_ = f"{help_} (default: {_show(default)})".strip()
        else:
            help_ = f"{help_} (required)".strip()
        kw: dict[str, Any] = {"dest": prefix + f.name, "default": argparse.SUPPRESS}
        origin = typing.get_origin(tp)
        if tp is bool:
            kw.update(type=_parse_bool, nargs="?", const=True, metavar="BOOL")
        elif origin in (list, tuple):
            args = [a for a in typing.get_args(tp) if a is not Ellipsis] or [str]
            # mixed item types are read as strings and converted per item by the coercion
            kw.update(_scalar_kwargs(args[0] if len(set(args)) == 1 else str))
            fixed = origin is tuple and Ellipsis not in typing.get_args(tp)
            kw.update(nargs=len(args) if fixed else "*")
        elif origin is typing.Literal or tp in (int, float, str) or _is_path(tp):
            kw.update(_scalar_kwargs(tp))
        else:
            kw.update(type=json.loads, metavar="JSON")
            help_ = f"{help_} [JSON]"
        if optional and tp is not bool and "nargs" not in kw:
            kw["type"] = _OrNone(kw.get("type", str))
            if "choices" in kw:
                kw["choices"] = (*kw["choices"], None)
            help_ = f"{help_} ['none' for None]"
        parser.add_argument(flag, help=help_.replace("%", "%%"), **kw)
        if tp is bool and negative_flags:
            parser.add_argument(
                _flag_name(prefix, "no_" + f.name),
                dest=prefix + f.name,
                action="store_const",
                const=False,
                default=argparse.SUPPRESS,
                help=f"same as {flag} false",
            )
    return parser


def _is_path(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, PurePath)


def _scalar_kwargs(tp: Any) -> dict[str, Any]:
    """argparse ``type``/``choices`` for one value of type ``tp``."""
    if typing.get_origin(tp) is typing.Literal:
        choices = typing.get_args(tp)
        kinds = {type(c) for c in choices}
        kind = kinds.pop() if len(kinds) == 1 else str
        return {"choices": choices, "type": kind if kind in (int, float, str) else str}
    if tp is bool:
        return {"type": _parse_bool}
    if tp in (int, float, str) or _is_path(tp):
        return {"type": tp}
    return {"type": str}


def add_config_arguments(
    parser: argparse.ArgumentParser, cls: type, *, prefix: str = ""
) -> argparse.ArgumentParser:
    """Add ``--config FILE`` and one flag per field of dataclass ``cls`` (in a help group named
    after the class); read them back with :func:`config_from_args`.

    The file (YAML, JSON or TOML, see :func:`load_config_file`) is applied first and only the
    flags the user typed override it. ``bool`` fields get ``--x``, ``--x false`` and ``--no-x``.
    """
    if any(f.name == "config" for f in dataclasses.fields(cls)) and not prefix:
        raise ConfigError(
            f"{cls.__name__} has a field named 'config', which clashes with --config; "
            "rename the field or pass a prefix"
        )
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"YAML, JSON or TOML file of {cls.__name__} fields, applied before the flags",
    )
    doc = (cls.__doc__ or "").strip().split("\n\n")[0]
    if doc.startswith(f"{cls.__name__}("):  # dataclass's generated signature, not a docstring
        doc = ""
    group = parser.add_argument_group(f"{cls.__name__} fields", " ".join(doc.split()) or None)
    add_dataclass_arguments(group, cls, prefix=prefix, negative_flags=True)
    return parser


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a mapping of field names to values: TOML for ``.toml``, JSON for ``.json``, YAML
    otherwise (an empty YAML file is an empty mapping)."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"config file {str(p)!r} does not exist")
    text = p.read_text()
    suffix = p.suffix.lower()
    if suffix == ".toml":
        import tomllib

        try:
            data: Any = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {str(p)!r} is not valid TOML: {exc}") from None
    elif suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"config file {str(p)!r} is not valid JSON: {exc}") from None
    else:
        import yaml

        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {str(p)!r} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(p)!r} must hold a mapping, got {type(data).__name__}")
    return data


class _Mismatch(Exception):
    """A value does not fit a type; carries what was expected."""


def _coerce(tp: Any, value: Any, where: str) -> Any:
    """``value`` converted to annotation ``tp`` (strings are parsed as a flag would be, lists
    become tuples, mappings become nested dataclasses); raises :class:`_Mismatch`."""
    tp, optional = _base_type(tp)
    if tp is Any:
        return value
    if value is None:
        if optional or tp is type(None):
            return None
        raise _Mismatch(f"a value of type {_describe(tp)}, not None")
    origin = typing.get_origin(tp)
    if isinstance(value, str) and optional and value.lower() in _NONE_WORDS and tp is not str:
        return None
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return _parse_bool(value)
            except argparse.ArgumentTypeError:
                pass
        raise _Mismatch("a boolean (true/false)")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        raise _Mismatch("an integer")
    if tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)  # YAML 1.1 reads ``1e-3`` as a string
            except ValueError:
                pass
        raise _Mismatch("a number")
    if tp is str:
        if isinstance(value, str | PurePath):
            return str(value)
        raise _Mismatch("a string (quote it in YAML)")
    if _is_path(tp):
        if isinstance(value, str | PurePath):
            return tp(value)
        raise _Mismatch("a path string")
    if origin is typing.Literal:
        choices = typing.get_args(tp)
        for c in choices:
            if value == c and type(value) is type(c):
                return c
        raise _Mismatch(f"one of {list(choices)}")
    if origin in (list, tuple):
        if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
            raise _Mismatch(f"a list ({_describe(tp)})")
        args = typing.get_args(tp)
        if origin is tuple and args and Ellipsis not in args:
            if len(value) != len(args):
                raise _Mismatch(f"a list of exactly {len(args)} values ({_describe(tp)})")
            inner = list(args)
        else:
            inner = [args[0] if args else Any] * len(value)
        items = []
        for i, (t, v) in enumerate(zip(inner, value, strict=True)):
            try:
                items.append(_coerce(t, v, where))
            except _Mismatch as exc:
                raise _Mismatch(f"{exc} at item {i} (got {v!r})") from None
        return tuple(items) if origin is tuple else items
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if isinstance(value, tp):
            return value
        if isinstance(value, Mapping):
            return config_from_dict(tp, dict(value), source=where)
        raise _Mismatch(f"a mapping of {tp.__name__} fields")
    if tp is dict or origin is dict:
        if isinstance(value, Mapping):
            return dict(value)
        raise _Mismatch("a mapping")
    return value  # other annotations (unions, custom classes) are left to the dataclass


def _describe(tp: Any) -> str:
    return tp.__name__ if isinstance(tp, type) else str(tp)


def _check_keys(cls: type, values: Mapping[str, Any], source: str) -> None:
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    unknown = sorted(set(values) - set(names))
    if unknown:
        hints = [
            f"{k!r} -> {m[0]!r}" for k in unknown if (m := difflib.get_close_matches(k, names, 1))
        ]
        hint = f" (did you mean {', '.join(hints)}?)" if hints else ""
        raise ConfigError(
            f"{source}: unknown field(s) {unknown} for {cls.__name__}{hint}; known: {sorted(names)}"
        )


def _coerce_field(cls: type, hints: dict[str, Any], name: str, value: Any, source: str) -> Any:
    try:
        return _coerce(hints[name], value, f"{source}: field {name!r}")
    except _Mismatch as exc:
        raise ConfigError(
            f"{source}: field {name!r} of {cls.__name__} expects {exc}, got {value!r}"
        ) from None


def _construct(cls: type[T], values: dict[str, Any], source: str) -> T:
    missing = [
        f.name
        for f in dataclasses.fields(cls)
        if f.init and f.name not in values and _default(f) is dataclasses.MISSING
    ]
    if missing:
        raise ConfigError(f"{source}: {cls.__name__} needs field(s) {missing}; none was given")
    try:
        return cls(**values)
    except LLMCoreError:
        raise
    except (TypeError, ValueError) as exc:
        if type(exc) not in (TypeError, ValueError):  # a package's own error class: keep it
            raise
        raise ConfigError(f"{source}: invalid {cls.__name__}: {exc}") from exc


def config_from_dict(cls: type[T], values: dict[str, Any], *, source: str = "config") -> T:
    """Build ``cls`` from a mapping, refusing unknown keys with the list of known ones and
    values that do not fit a field's annotation (naming the field). Validation in the
    dataclass's ``__post_init__`` applies as usual; a plain ``ValueError``/``TypeError`` from
    it becomes a :class:`ConfigError` prefixed with ``source``."""
    _check_keys(cls, values, source)
    hints = typing.get_type_hints(cls)
    coerced = {k: _coerce_field(cls, hints, k, v, source) for k, v in values.items()}
    return _construct(cls, coerced, source)


def config_from_args(cls: type[T], args: argparse.Namespace, *, prefix: str = "") -> T:
    """Build ``cls`` from a namespace parsed with :func:`add_config_arguments`: dataclass
    defaults, then ``args.config`` (if given), then the flags the user typed."""
    hints = typing.get_type_hints(cls)
    path = getattr(args, "config", None)
    raw: dict[str, Any] = {}
    values: dict[str, Any] = {}
    source = "command-line flags"
    if path:
        file_source = f"config file {str(path)!r}"
        raw = load_config_file(path)
        _check_keys(cls, raw, file_source)
        values = {k: _coerce_field(cls, hints, k, v, file_source) for k, v in raw.items()}
        source = f"{file_source} with command-line flags"
    for f in dataclasses.fields(cls):
        if not f.init or not hasattr(args, prefix + f.name):
            continue
        value = getattr(args, prefix + f.name)
        if isinstance(value, Mapping) and isinstance(raw.get(f.name), Mapping):
            value = {**raw[f.name], **value}  # a nested config's JSON flag updates the file's
        values[f.name] = _coerce_field(cls, hints, f.name, value, _flag_name(prefix, f.name))
    return _construct(cls, values, source)


def namespace_to_config(cls: type[T], ns: argparse.Namespace, *, prefix: str = "") -> T:
    """Merge ``ns.config`` (if any) with the flags present in ``ns`` into a ``cls``
    (same as :func:`config_from_args`)."""
    return config_from_args(cls, ns, prefix=prefix)


def parse_config(cls: type[T], argv: Sequence[str] | None = None, *, prog: str | None = None) -> T:
    """Parse ``argv`` into a ``cls`` instance: ``--config FILE`` then flags."""
    parser = argparse.ArgumentParser(prog=prog, description=(cls.__doc__ or "").strip())
    add_config_arguments(parser, cls)
    return config_from_args(cls, parser.parse_args(argv))


def config_to_dict(cfg: Any) -> dict[str, Any]:
    """Dataclass to a plain (YAML/JSON-ready) dict; tuples become lists, Paths strings."""

    def plain(v: Any) -> Any:
        if isinstance(v, tuple | list):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, PurePath):
            return str(v)
        return v

    return {k: plain(v) for k, v in dataclasses.asdict(cfg).items()}


def save_config(cfg: Any, path: str | Path) -> None:
    """Write a config dataclass as JSON (``.json`` path) or YAML (otherwise); the file
    round-trips through ``--config`` / :func:`load_config_file`."""
    from llmcore.data import atomic_write_text

    suffix = Path(path).suffix.lower()
    if suffix == ".toml":
        raise ConfigError(
            f"save_config writes YAML or JSON, not TOML: use a .yaml or .json path, got {path!s}"
        )
    if suffix == ".json":
        atomic_write_text(path, json.dumps(config_to_dict(cfg), indent=2) + "\n")
        return
    import yaml

    atomic_write_text(path, yaml.safe_dump(config_to_dict(cfg), sort_keys=False))
