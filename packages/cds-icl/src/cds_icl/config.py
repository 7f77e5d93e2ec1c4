"""Configs of the ``cds-icl`` subcommands (dataclasses; flags and ``--config FILE``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class OrderConfig:
    """Order a demo pool with CDS (or its high-curvature ablation)."""

    pool: str = ""
    """pool JSONL (rows with problem and solution)"""
    embed: str = "hash"
    """embedding backend[:model]: st:BAAI/bge-m3, hf-mean:<id or path>, openai:<name>, hash"""
    strategy: str = "cds"
    """cds or high_curvature"""
    n_starts: int = 10
    """nearest-neighbour starts (the first indices)"""
    seed: int | None = None
    """seed of the pool shuffle recorded in the order file (default: the pool's own)"""
    base_url: str | None = None
    """OpenAI-compatible server for embed=openai:<name>"""
    out: str = "order.json"
    """order JSON to write"""


@dataclass
class PoolConfig:
    """Build a demo pool: reference solutions, or the target model's own (self-generated)."""

    task: str = "synthetic"
    """synthetic, gsm8k or math:<subtask>"""
    model: str = ""
    """target model (hub id or local path) for self-generated pools; empty: reference pool"""
    variant: str = "firstans"
    """firstans, correctans or wrongans"""
    n: int = 128
    """first n training items (2^r), shuffled with seed"""
    seed: int = 71
    """seed of the pool shuffle (the reference pipeline's default)"""
    max_attempts: int = 13
    """sampled attempts per problem before falling back"""
    temperature: float = 1.0
    """sampling temperature of the attempts"""
    max_new_tokens: int = 4096
    """token cap of an acceptable solution (40 tokens of slack are added)"""
    backend: str = "hf"
    """hf or vllm"""
    chat: bool = True
    """wrap prompts in the model's chat template"""
    out: str = "pool.jsonl"
    """pool JSONL to write"""


@dataclass
class EvalConfig:
    """Few-shot CoT evaluation of one selector over seeds."""

    model: str = ""
    """hub id or local path"""
    task: str = "synthetic"
    """synthetic, gsm8k or math:<subtask>"""
    selector: str = "cds"
    """random, original, kate, dissimilar, complexity, cds, high_curvature, understandability"""
    k: int = 16
    """demonstrations per prompt"""
    seeds: str = "71,72,73,74,75"
    """comma-separated seeds"""
    pool: str | None = None
    """pool JSONL (e.g. a self-generated pool); default: the task's reference pool"""
    order: str | None = None
    """order JSON to apply instead of a selector (checked against the pool)"""
    n_pool: int = 128
    """first n training items in the reference pool"""
    embed: str = "hash"
    """embedding backend[:model] for kate / dissimilar / cds / high_curvature"""
    limit: int | None = None
    """evaluate only the first N test items"""
    backend: str = "hf"
    """hf or vllm (prefix caching on)"""
    max_new_tokens: int = 1024
    """8172 reproduces the paper's decoding on long-context models"""
    chat: bool = True
    """wrap prompts in the model's chat template (one user turn)"""
    enable_thinking: bool | None = None
    """passed to Qwen3-style chat templates when set"""
    batch_size: int = 8
    """prompts per generate call (a shared demo block is prefilled once per batch)"""
    out: str = "results.jsonl"
    """resumable results JSONL"""


@dataclass
class ScoreConfig:
    """Understandability scores (mean NLL of each solution under the target; an extension)."""

    model: str = ""
    """target model (hub id or local path)"""
    pool: str = ""
    """pool JSONL to score"""
    batch_size: int = 8
    """pairs per forward pass"""
    out: str = "scores.jsonl"
    """rows {idx, nll}"""


@dataclass
class LMEvalTasksConfig:
    """Write an lm-eval task over an ordered pool."""

    pool: str = ""
    """pool JSONL the order refers to"""
    order: str | None = None
    """order JSON (default: pool order)"""
    task: str = "synthetic"
    """task whose test items the lm-eval task evaluates"""
    k: int | None = None
    """demonstrations (default: the whole order)"""
    out: str = "tasks"
    """folder for --include_path"""
    max_gen_toks: int = 1024
    """new tokens per answer (8172 for the paper's decoding)"""
    task_prefix: str = "cds_"
    """prefix of the task name"""
