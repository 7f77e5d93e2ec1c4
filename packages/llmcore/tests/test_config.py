from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pytest

from llmcore.config import load_config_file, parse_config, save_config
from llmcore.errors import ConfigError


@dataclass
class DemoConfig:
    """A demo config."""

    model: str = field(default="tiny-llama", metadata={"help": "model id or path"})
    steps: int = field(default=10, metadata={"help": "training steps"})
    lr: float = 1e-3
    greedy: bool = False
    mode: Literal["a", "b"] = "a"
    layers: tuple[int, ...] = (1, 2)
    out: str | None = None

    def __post_init__(self) -> None:
        if self.steps <= 0:
            raise ConfigError(f"steps must be positive, got {self.steps}")


def test_defaults_yaml_and_flags_precedence(tmp_path) -> None:
    assert parse_config(DemoConfig, []) == DemoConfig()
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("steps: 50\nlr: 0.5\nlayers: [3, 4]\n")
    cfg = parse_config(DemoConfig, ["--config", str(cfg_file), "--lr", "0.1", "--greedy"])
    assert cfg.steps == 50 and cfg.lr == 0.1 and cfg.greedy is True and cfg.layers == (3, 4)
    cfg = parse_config(DemoConfig, ["--greedy", "false", "--mode", "b", "--layers", "7", "8"])
    assert cfg.greedy is False and cfg.mode == "b" and cfg.layers == (7, 8)


def test_yaml_round_trip(tmp_path) -> None:
    cfg = DemoConfig(steps=3, layers=(5,), out="x")
    save_config(cfg, tmp_path / "out.yaml")
    assert parse_config(DemoConfig, ["--config", str(tmp_path / "out.yaml")]) == cfg


def test_bad_values_are_clear(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("stepz: 3\n")
    with pytest.raises(ConfigError, match=r"unknown field\(s\) \['stepz'\]"):
        parse_config(DemoConfig, ["--config", str(bad)])
    with pytest.raises(ConfigError, match="steps must be positive"):
        parse_config(DemoConfig, ["--steps", "0"])
    with pytest.raises(ConfigError, match="does not exist"):
        load_config_file(tmp_path / "missing.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config_file(tmp_path / "list.yaml")
    with pytest.raises(SystemExit):
        parse_config(DemoConfig, ["--mode", "c"])


def test_help_lists_field_docs(capsys) -> None:
    with pytest.raises(SystemExit):
        parse_config(DemoConfig, ["--help"])
    out = capsys.readouterr().out
    assert "--steps" in out and "training steps" in out and "default: 10" in out
