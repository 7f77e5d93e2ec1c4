"""Configs of spec-align runs (dataclasses with CPU-safe defaults; YAML via ``--ttd-config``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class SelfRefineConfig:
    """Self-Refine (official ``config_ttd.yaml``)."""

    max_iters: int = field(default=3, metadata={"help": "feedback+refine rounds"})
    max_history_length: int = field(default=1, metadata={"help": "(response, feedback) pairs kept"})


@dataclass
class MoreThinkConfig:
    """MoreThink budget forcing."""

    rethink_count: int = field(default=3, metadata={"help": "model calls (forced 'Wait,' + 1)"})


@dataclass
class BestOfNConfig:
    """Best-of-N (reconstructed; N is not published)."""

    n: int = field(default=4, metadata={"help": "samples per prompt"})


@dataclass
class TPOConfig:
    """Test-Time Preference Optimization (reconstructed settings)."""

    n_samples: int = field(default=5, metadata={"help": "samples per round"})
    max_iters: int = field(default=2, metadata={"help": "loss/gradient/update rounds"})


@dataclass
class TTDConfig:
    """All TTD method settings; the YAML keys are the official ones plus best_of_n / tpo."""

    self_refine: SelfRefineConfig = field(default_factory=SelfRefineConfig)
    more_think: MoreThinkConfig = field(default_factory=MoreThinkConfig)
    best_of_n: BestOfNConfig = field(default_factory=BestOfNConfig)
    tpo: TPOConfig = field(default_factory=TPOConfig)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TTDConfig:
        sections = {
            "self_refine": SelfRefineConfig,
            "more_think": MoreThinkConfig,
            "best_of_n": BestOfNConfig,
            "tpo": TPOConfig,
        }
        unknown = set(d) - set(sections)
        if unknown:
            raise ValueError(
                f"unknown TTD config sections {sorted(unknown)}; valid: {', '.join(sections)}"
            )
        kw = {}
        for name, c in sections.items():
            vals = d.get(name) or {}
            bad = set(vals) - set(c.__dataclass_fields__)
            if bad:
                raise ValueError(
                    f"unknown keys {sorted(bad)} in {name}; valid: {', '.join(c.__dataclass_fields__)}"
                )
            kw[name] = c(**vals)
        return cls(**kw)

    @classmethod
    def from_yaml(cls, path: str | Path) -> TTDConfig:
        import yaml

        return cls.from_dict(yaml.safe_load(Path(path).read_text()) or {})

    def as_dict(self) -> dict[str, dict[str, Any]]:
        return asdict(self)
