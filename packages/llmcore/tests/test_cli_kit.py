"""The shared CLI kit: run_main's error policy, config flags merged with --config, lazy exports."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import textwrap
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from llmcore.cli import run_main
from llmcore.config import (
    add_config_arguments,
    config_from_args,
    load_config_file,
    save_config,
)
from llmcore.errors import ConfigError, DataError, LLMCoreError
from llmcore.lazy import lazy_exports

# ---------------------------------------------------------------- run_main


class ToolError(LLMCoreError):
    """Stands for a method package's own error class (they all derive from LLMCoreError)."""


def _tool_parser(func) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tool")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("go")
    s.add_argument("--n", type=int, default=0)
    s.set_defaults(func=func)
    return p


def test_run_main_returns_status_and_package_errors_exit_2(capsys) -> None:
    assert run_main("tool", _tool_parser(lambda a: a.n), ["go", "--n", "3"]) == 3
    assert run_main("tool", lambda: _tool_parser(lambda a: None), ["go"]) == 0

    def fail(args: argparse.Namespace) -> int:
        raise ToolError(f"--n must be even, got {args.n}")

    assert run_main("tool", _tool_parser(fail), ["go", "--n", "3"]) == 2
    captured = capsys.readouterr()
    assert captured.err == "tool: error: --n must be even, got 3\n" and captured.out == ""
    # the core's own errors follow the same policy (DataError is an LLMCoreError)
    assert run_main("tool", _tool_parser(lambda a: (_ for _ in ()).throw(DataError("bad"))), ["go"])
    assert capsys.readouterr().err == "tool: error: bad\n"


def test_run_main_interrupt_and_bugs(capsys) -> None:
    def interrupted(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    assert run_main("tool", _tool_parser(interrupted), ["go"]) == 130
    assert capsys.readouterr().err == "tool: interrupted\n"

    def buggy(args: argparse.Namespace) -> int:
        return {}["missing"]

    with pytest.raises(KeyError):  # a bug is not turned into a tidy message
        run_main("tool", _tool_parser(buggy), ["go"])
    with pytest.raises(SystemExit) as exc:  # bad flags stay argparse's business
        run_main("tool", _tool_parser(buggy), ["go", "--n", "x"])
    assert exc.value.code == 2


def test_run_main_handler_and_extra_error_classes(capsys) -> None:
    flat = argparse.ArgumentParser(prog="flat")
    flat.add_argument("x", type=int)
    assert run_main("flat", flat, ["5"], handler=lambda a: a.x + 1) == 6
    with pytest.raises(TypeError, match="set_defaults"):
        run_main("flat", flat, ["5"])

    class LegacyError(ValueError):
        pass

    def legacy(args: argparse.Namespace) -> int:
        raise LegacyError("old hierarchy")

    with pytest.raises(LegacyError):
        run_main("flat", flat, ["1"], handler=legacy)
    assert run_main("flat", flat, ["1"], handler=legacy, user_errors=(LegacyError,)) == 2
    assert capsys.readouterr().err == "flat: error: old hierarchy\n"


# ---------------------------------------------------------------- config flags


@dataclass
class Optim:
    """Optimizer settings."""

    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)


@dataclass
class TrainCfg:
    """Tiny training run."""

    model: str = field(default="tiny-llama", metadata={"help": "model id or path"})
    steps: int = 10
    """optimizer steps (100% of them logged)"""
    greedy: bool = False
    """decode greedily"""
    mode: Literal["fast", "exact"] = "fast"
    layers: tuple[int, ...] = (1, 2)
    out: Path | None = None
    seed: int | None = 0
    optim: Optim = field(default_factory=Optim)

    def __post_init__(self) -> None:
        if self.steps <= 0:
            raise ValueError(f"steps must be positive, got {self.steps}")


def _parse(argv: list[str]) -> TrainCfg:
    p = argparse.ArgumentParser(prog="train")
    add_config_arguments(p, TrainCfg)
    return config_from_args(TrainCfg, p.parse_args(argv))


def test_precedence_default_file_flag(tmp_path) -> None:
    assert _parse([]) == TrainCfg()
    f = tmp_path / "c.yaml"
    f.write_text("steps: 50\ngreedy: true\nmode: exact\nlayers: [3, 4]\noptim: {lr: 0.5}\n")
    cfg = _parse(["--config", str(f)])  # the file beats the defaults; untyped flags keep it
    assert cfg.steps == 50 and cfg.greedy is True and cfg.mode == "exact"
    assert cfg.layers == (3, 4) and cfg.optim == Optim(lr=0.5) and cfg.model == "tiny-llama"
    cfg = _parse(["--steps", "7", "--config", str(f), "--no-greedy", "--layers", "9"])
    assert cfg.steps == 7 and cfg.greedy is False and cfg.layers == (9,)  # typed flags win
    assert cfg.mode == "exact" and cfg.optim.lr == 0.5
    cfg = _parse(["--config", str(f), "--greedy", "false", "--optim", '{"betas": [0.5, 0.6]}'])
    assert cfg.greedy is False and cfg.optim == Optim(lr=0.5, betas=(0.5, 0.6))  # merged
    cfg = _parse(["--greedy", "--out", "runs/a", "--seed", "none", "--mode", "exact"])
    assert cfg.greedy is True and cfg.out == Path("runs/a") and cfg.seed is None


def test_bad_key_and_bad_values_name_the_culprit(tmp_path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("stepz: 3\n")
    with pytest.raises(ConfigError) as exc:
        _parse(["--config", str(f)])
    msg = str(exc.value)
    assert str(f) in msg and "['stepz']" in msg and "did you mean 'stepz' -> 'steps'" in msg
    assert "known: ['greedy', 'layers', 'mode', 'model', 'optim', 'out', 'seed', 'steps']" in msg
    f.write_text("optim: {lr: 0.1, momentum: 0.9}\n")
    with pytest.raises(ConfigError, match=r"field 'optim'.*unknown field\(s\) \['momentum'\]"):
        _parse(["--config", str(f)])
    for text, name, expected in [
        ("steps: many\n", "steps", "an integer"),
        ("greedy: maybe\n", "greedy", "a boolean"),
        ("mode: slow\n", "mode", "one of ['fast', 'exact']"),
        ("layers: [1, x]\n", "layers", "an integer at item 1"),
        ("model: 3\n", "model", "a string"),
    ]:
        f.write_text(text)
        with pytest.raises(ConfigError, match=re.escape(f"{name}' of TrainCfg expects {expected}")):
            _parse(["--config", str(f)])
    f.write_text("steps: 0\n")  # __post_init__'s ValueError becomes a ConfigError with the source
    with pytest.raises(ConfigError, match=r"bad.yaml' with command-line flags: invalid TrainCfg"):
        _parse(["--config", str(f)])
    with pytest.raises(ConfigError, match="command-line flags: invalid TrainCfg: steps must be"):
        _parse(["--steps", "0"])
    with pytest.raises(SystemExit):  # a flag argparse cannot parse is a usage error
        _parse(["--mode", "slow"])
    f.write_text("lr: 1e-3\n")  # YAML 1.1 reads 1e-3 as a string; a float field accepts it
    p = argparse.ArgumentParser()
    add_config_arguments(p, Optim)
    assert config_from_args(Optim, p.parse_args(["--config", str(f)])).lr == 1e-3


def test_required_fields_and_package_errors_pass_through(tmp_path) -> None:
    class PkgConfigError(ValueError):
        pass

    @dataclass
    class Needs:
        data: str
        k: int = 1

        def __post_init__(self) -> None:
            if self.k > 5:
                raise PkgConfigError(f"k must be <= 5, got {self.k}")

    p = argparse.ArgumentParser()
    add_config_arguments(p, Needs)
    with pytest.raises(ConfigError, match=r"Needs needs field\(s\) \['data'\]"):
        config_from_args(Needs, p.parse_args([]))
    assert config_from_args(Needs, p.parse_args(["--data", "x.jsonl"])) == Needs("x.jsonl")
    with pytest.raises(PkgConfigError, match="k must be"):  # the package's class is kept
        config_from_args(Needs, p.parse_args(["--data", "x", "--k", "6"]))


def test_help_lists_fields_with_help_and_defaults() -> None:
    p = argparse.ArgumentParser(prog="train")
    add_config_arguments(p, TrainCfg)
    text = " ".join(p.format_help().split())
    assert "TrainCfg fields: Tiny training run." in text
    assert "--config FILE YAML, JSON or TOML file of TrainCfg fields" in text
    assert "--model MODEL model id or path (default: 'tiny-llama')" in text
    assert "optimizer steps (100% of them logged) (default: 10)" in text  # from the docstring
    assert "--greedy [BOOL] decode greedily (default: False)" in text and "--no-greedy" in text
    assert "--mode {fast,exact}" in text and "--layers [LAYERS ...]" in text
    assert "--seed SEED (default: 0) ['none' for None]" in text
    assert "--optim JSON (default: Optim(lr=0.001, betas=(0.9, 0.999))) [JSON]" in text


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_save_config_round_trips_through_config_flag(tmp_path, suffix) -> None:
    cfg = TrainCfg(
        steps=3, greedy=True, mode="exact", layers=(5,), out=Path("o"), seed=None, optim=Optim(2.0)
    )
    save_config(cfg, tmp_path / f"c{suffix}")
    assert _parse(["--config", str(tmp_path / f"c{suffix}")]) == cfg


def test_toml_config_and_file_errors(tmp_path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('steps = 4\nmode = "exact"\n[optim]\nlr = 0.25\n')
    cfg = _parse(["--config", str(f), "--steps", "8"])
    assert cfg.steps == 8 and cfg.mode == "exact" and cfg.optim.lr == 0.25
    f.write_text("steps = = 4\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config_file(f)
    (tmp_path / "c.json").write_text("{steps: 4}")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config_file(tmp_path / "c.json")
    with pytest.raises(ConfigError, match="not TOML"):
        save_config(TrainCfg(), tmp_path / "out.toml")


def test_run_main_reports_config_errors(tmp_path, capsys) -> None:
    p = argparse.ArgumentParser(prog="train")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("run")
    add_config_arguments(s, TrainCfg)
    s.set_defaults(func=lambda a: config_from_args(TrainCfg, a).steps)
    (tmp_path / "c.yaml").write_text("steps: 12\n")
    assert run_main("train", p, ["run", "--config", str(tmp_path / "c.yaml")]) == 12
    (tmp_path / "c.yaml").write_text("stepz: 12\n")
    assert run_main("train", p, ["run", "--config", str(tmp_path / "c.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("train: error: config file") and "'stepz'" in err


def test_help_path_imports_no_torch() -> None:
    code = textwrap.dedent(
        """
        import argparse, sys
        from dataclasses import dataclass
        from llmcore.cli import run_main
        from llmcore.config import add_config_arguments
        from llmcore.lazy import lazy_exports

        @dataclass
        class C:
            steps: int = 1

        def build():
            p = argparse.ArgumentParser(prog="t")
            add_config_arguments(p, C)
            return p

        try:
            run_main("t", build, ["--help"])
        except SystemExit:
            pass
        assert "torch" not in sys.modules and "transformers" not in sys.modules
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "--steps STEPS" in out.stdout


# ---------------------------------------------------------------- lazy exports


@pytest.fixture
def make_pkg(tmp_path, monkeypatch):
    """Write a throwaway package under tmp_path (unique name) and import it."""
    monkeypatch.syspath_prepend(str(tmp_path))
    created: list[str] = []

    def make(init: str, **modules: str):
        import importlib

        name = f"lazypkg_{uuid.uuid4().hex[:8]}"
        root = tmp_path / name
        root.mkdir()
        (root / "__init__.py").write_text(textwrap.dedent(init))
        for mod, text in modules.items():
            (root / f"{mod}.py").write_text(textwrap.dedent(text))
        created.append(name)
        return importlib.import_module(name), name

    yield make
    for key in [k for k in sys.modules if k.split(".")[0] in created]:
        del sys.modules[key]


def test_lazy_exports_import_on_first_access(make_pkg) -> None:
    init = """
        from llmcore.lazy import lazy_exports

        __getattr__, __dir__ = lazy_exports(
            __name__,
            {"Thing": ".heavy", "make": ".heavy:build", "dumps": "json:dumps"},
            submodules=["extra"],
        )
    """
    heavy = """
        class Thing:
            pass

        def build():
            return Thing()
    """
    pkg, name = make_pkg(init, heavy=heavy, extra="VALUE = 7\n")
    assert f"{name}.heavy" not in sys.modules and f"{name}.extra" not in sys.modules
    assert {"Thing", "make", "dumps", "extra"} <= set(dir(pkg))
    assert f"{name}.heavy" not in sys.modules  # dir() imports nothing
    thing_cls = pkg.Thing
    assert f"{name}.heavy" in sys.modules and thing_cls is sys.modules[f"{name}.heavy"].Thing
    assert "Thing" in vars(pkg)  # cached in the package's globals
    assert isinstance(pkg.make(), thing_cls)
    import json

    assert pkg.dumps is json.dumps
    assert f"{name}.extra" not in sys.modules
    assert pkg.extra.VALUE == 7 and f"{name}.extra" in sys.modules
    from importlib import import_module

    assert import_module(name).Thing is thing_cls  # `from pkg import Thing` style works too
    with pytest.raises(AttributeError) as exc:
        pkg.nope  # noqa: B018
    assert str(exc.value) == f"module {name!r} has no attribute 'nope'"
    assert not hasattr(pkg, "nope")


def test_lazy_exports_errors(make_pkg) -> None:
    init = """
        from llmcore.lazy import lazy_exports

        __getattr__, __dir__ = lazy_exports(__name__, {"Gone": ".mod", "Broken": ".broken"})
    """
    pkg, name = make_pkg(init, mod="X = 1\n", broken="import no_such_dependency_xyz\n")
    with pytest.raises(AttributeError, match=rf"exports 'Gone' from '{name}.mod'.*'Gone'"):
        pkg.Gone  # noqa: B018
    with pytest.raises(ModuleNotFoundError, match="no_such_dependency_xyz"):  # not masked
        pkg.Broken  # noqa: B018
    for bad in ({"A": ""}, {"A": "."}, {"A": ".mod:"}, {"A": ".mod:1x"}, {"A": 3}):
        with pytest.raises(ConfigError, match="expected 'module' or 'module:attr'"):
            lazy_exports("p", bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="both a lazy export and a submodule"):
        lazy_exports("p", {"zoo": ".zoo"}, submodules=["zoo"])
