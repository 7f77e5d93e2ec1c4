"""Configs of spec-align runs (dataclasses with CPU-safe defaults; YAML via ``--ttd-config``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from spec_align.errors import SpecConfigError


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
            raise SpecConfigError(
                f"unknown TTD config sections {sorted(unknown)}; valid: {', '.join(sections)}"
            )
        kw = {}
        for name, c in sections.items():
            vals = d.get(name) or {}
            bad = set(vals) - set(c.__dataclass_fields__)
            if bad:
                raise SpecConfigError(
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


# --- command-line configs ------------------------------------------------------------------
# One dataclass per command family; ``spec-align <cmd> --help`` lists their fields as flags
# (``--max-new-tokens``, ``--no-prefix-cache``, ...), ``--config FILE`` (YAML/JSON/TOML) sets
# them from a file and a flag typed on the command line overrides the file.


@dataclass
class DecodingConfig:
    """Decoding of the policy model."""

    max_new_tokens: int = field(default=256, metadata={"help": "tokens per model call"})
    temperature: float = field(default=0.0, metadata={"help": "0 = greedy"})
    top_p: float = field(default=1.0, metadata={"help": "nucleus mass (1 disables it)"})
    top_k: int = field(default=0, metadata={"help": "0 disables top-k"})
    repetition_penalty: float = field(
        default=1.0, metadata={"help": "CTRL repetition penalty (1 disables it)"}
    )
    seed: int = field(default=0, metadata={"help": "sampling seed"})
    batch_size: int = field(default=16, metadata={"help": "prompts per batched stage (HF)"})
    num_threads: int = field(default=8, metadata={"help": "concurrent HTTP requests"})
    prefix_cache: bool = field(
        default=True,
        metadata={"help": "HF: reuse each conversation's KV prefix across continuation stages"},
    )

    def gen(self) -> dict[str, Any]:
        """The per-call decoding keywords of a backend."""
        return {
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "repetition_penalty": self.repetition_penalty,
        }


@dataclass
class JudgeConfig:
    """Judging and scoring."""

    judge: str = field(
        default="rule", metadata={"help": "rule | hf:ID | openai:MODEL@URL | vllm:ID"}
    )
    mode: Literal["joint", "sequential"] = field(
        default="joint", metadata={"help": "one judge call per response, or one per spec"}
    )
    alpha: float = field(default=0.3, metadata={"help": "SAR floor of a safe response"})
    na_policy: Literal["official", "exclude"] = field(
        default="official", metadata={"help": "'exclude' is NOT the official score"}
    )
    max_retries: int = field(default=5, metadata={"help": "judge attempts per response"})
    on_failure: Literal["raise", "record"] = field(
        default="record", metadata={"help": "after the last failed attempt"}
    )
    judge_cache: str | None = field(default=None, metadata={"help": "folder caching judge replies"})


@dataclass
class GenerateConfig(DecodingConfig):
    """Run one TTD method on one scenario."""

    scenario: str | None = field(default=None, metadata={"help": "scenario name (required)"})
    data_dir: str | None = field(
        default=None, metadata={"help": "official data/ folder (default: vendored specs only)"}
    )
    backend: str | None = field(
        default=None, metadata={"help": "hf:ID | openai:MODEL@URL | vllm:ID | tiny (required)"}
    )
    method: str = field(default="vanilla", metadata={"help": "raw, vanilla, ..., align3"})
    ttd_config: str | None = field(
        default=None, metadata={"help": "YAML with the official TTD keys"}
    )
    reward: str | None = field(
        default=None, metadata={"help": "best_of_n/tpo reward: rule | judge:SPEC"}
    )
    adversarial: bool = field(
        default=True, metadata={"help": "generate from 'adversarial_prompt' (else 'prompt')"}
    )
    limit: int | None = field(default=None, metadata={"help": "first N items only"})
    strict: bool = field(default=False, metadata={"help": "error on an empty response"})
    tiny_templates: bool | None = field(
        default=None,
        metadata={
            "help": "short prompt texts of the tiny test model (default: with --backend tiny)"
        },
    )
    out: str | None = field(default=None, metadata={"help": "output path (required)"})

    def __post_init__(self) -> None:
        if self.tiny_templates is None:
            self.tiny_templates = self.backend == "tiny"


@dataclass
class EvaluateConfig(JudgeConfig):
    """Judge a generate.json and score it."""

    generations: str | None = field(default=None, metadata={"help": "generate.json (required)"})
    scenario: str | None = field(default=None, metadata={"help": "scenario name (required)"})
    data_dir: str | None = None
    out_dir: str | None = field(
        default=None, metadata={"help": "default: the folder of --generations"}
    )
    num_threads: int = field(default=8, metadata={"help": "concurrent HTTP judge requests"})


@dataclass
class RunConfig(GenerateConfig, JudgeConfig):
    """Generate + evaluate (with ``methods``: the benchmark)."""

    methods: str | None = field(
        default=None, metadata={"help": "comma list or 'all': run the benchmark"}
    )
    samples: int = field(default=1, metadata={"help": "samples per item"})
    plot: bool = field(default=True, metadata={"help": "write bench.png (extra 'plot')"})


@dataclass
class BenchConfig(RunConfig):
    """Every method vs vanilla in one run: table, JSON, plot."""

    scenario: str | None = field(
        default="synthetic",
        metadata={"help": "'synthetic' (the two held-out tiny-model scenarios) or a name"},
    )
    backend: str | None = field(default="tiny", metadata={"help": "hf:ID | openai:... | tiny"})
    methods: str | None = field(default="all", metadata={"help": "comma list or 'all'"})
    reward: str | None = field(
        default="rule", metadata={"help": "best_of_n/tpo reward: rule | judge:SPEC"}
    )
    out: str | None = field(default="spec_align_bench", metadata={"help": "output folder"})
