"""RL helpers for tiny models on CPU: trl GRPO config, robust rewards, data prefilter, verl parquet.

Needs the optional extra ``icml26-llmcore[trl]`` (``write_verl_parquet`` needs ``[datasets]``);
trl, accelerate and pyarrow are imported inside the functions, so importing this module is cheap.

Why it is in the core although no landed package trains with RL yet: the planned RL packages
(compositional generalisation after SFT, self-verification, physics simulators) each need the
same CPU-safe GRPO setup and reward guards, and trl's defaults (bf16, gradient checkpointing,
reporting, saving) fail or crawl on the CPU machines their tests run on.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import logging
import math
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from llmcore.errors import ConfigError, DataError, MissingExtraError

if TYPE_CHECKING:
    from trl import GRPOConfig

__all__ = [
    "CPU_GRPO_DEFAULTS",
    "PrefilterResult",
    "cpu_grpo_config",
    "pass_rate_prefilter",
    "reset_accelerate_state",
    "safe_reward",
    "write_verl_parquet",
]

log = logging.getLogger(__name__)

P = TypeVar("P")

#: Defaults of :func:`cpu_grpo_config`: fp32 on CPU, nothing saved or reported, sized for tiny
#: models (4 prompts x 4 completions of at most 16 tokens per step).
CPU_GRPO_DEFAULTS: dict[str, Any] = {
    "use_cpu": True,
    "bf16": False,
    "fp16": False,
    "report_to": [],
    "save_strategy": "no",
    "logging_steps": 1,
    "disable_tqdm": True,
    "per_device_train_batch_size": 4,
    "gradient_accumulation_steps": 1,
    "num_generations": 4,
    "max_completion_length": 16,
    "learning_rate": 1e-4,
    "gradient_checkpointing": False,
    "dataloader_pin_memory": False,
    "dataloader_num_workers": 0,
    "seed": 0,
}


def _require_trl(feature: str) -> Any:
    try:
        import trl
    except ImportError as e:
        raise MissingExtraError(feature, "trl") from e
    return trl


def cpu_grpo_config(
    output_dir: str | os.PathLike[str] | None = None, **overrides: Any
) -> GRPOConfig:
    """A ``trl.GRPOConfig`` that trains in fp32 on CPU, saves and reports nothing.

    ``overrides`` replace :data:`CPU_GRPO_DEFAULTS` (any ``GRPOConfig`` field). Without
    ``output_dir`` a fresh temporary directory is used (trl needs one even when saving nothing).

    Checked here with a :class:`~llmcore.errors.ConfigError` before trl's own checks: unknown field
    names, bf16/fp16 or ``use_cpu=False`` (this helper is CPU-only: build ``trl.GRPOConfig``
    yourself for GPU), ``num_generations < 2``, and trl 1.16's batch rule: the generation batch
    (``per_device_train_batch_size * world_size * gradient_accumulation_steps`` by default,
    ``* steps_per_generation`` if that is set, or ``generation_batch_size`` if that is set, which
    must then be a multiple of ``per_device_train_batch_size * world_size``) must be a multiple of
    ``num_generations``, since every prompt's group of completions must sit in one batch.
    """
    trl = _require_trl("llmcore.rl.cpu_grpo_config")
    known = {f.name for f in dataclasses.fields(trl.GRPOConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        hints = {u: difflib.get_close_matches(u, known, n=3) for u in unknown}
        raise ConfigError(
            f"unknown GRPOConfig field(s) {unknown}; close matches: {hints}"
            " (see trl.GRPOConfig for the full list)"
        )
    kw: dict[str, Any] = {**CPU_GRPO_DEFAULTS, **overrides}
    _check_cpu_grpo(kw)
    if output_dir is None:
        output_dir = tempfile.mkdtemp(prefix="llmcore-grpo-")
    return trl.GRPOConfig(output_dir=str(output_dir), **kw)


def _check_cpu_grpo(kw: dict[str, Any]) -> None:
    for flag in ("bf16", "fp16"):
        if kw.get(flag):
            raise ConfigError(
                f"{flag}={kw[flag]!r}: cpu_grpo_config trains in fp32 on CPU; drop {flag}, or build "
                "trl.GRPOConfig directly for mixed precision on a GPU"
            )
    if not kw.get("use_cpu"):
        raise ConfigError(
            f"use_cpu={kw.get('use_cpu')!r}: cpu_grpo_config is for CPU runs; build trl.GRPOConfig "
            "directly to train on an accelerator"
        )
    if kw.get("auto_find_batch_size"):
        raise ConfigError(
            "auto_find_batch_size=True: GRPO needs whole groups of num_generations completions per "
            "batch, which shrinking the batch breaks; set per_device_train_batch_size instead"
        )
    for name in ("per_device_train_batch_size", "gradient_accumulation_steps", "num_generations"):
        value = kw.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{name}={value!r}: must be a positive int")
    g = kw["num_generations"]
    if g < 2:
        raise ConfigError(
            f"num_generations={g}: GRPO needs at least 2 completions per prompt (the advantage is "
            "the reward minus the group mean)"
        )
    world = int(os.environ.get("WORLD_SIZE", "1"))
    per_step = kw["per_device_train_batch_size"] * world
    gbs, spg = kw.get("generation_batch_size"), kw.get("steps_per_generation")
    if gbs is not None and spg is not None:
        raise ConfigError(
            f"generation_batch_size={gbs} and steps_per_generation={spg}: set at most one of them"
        )
    if gbs is not None:
        if gbs % per_step:
            raise ConfigError(
                f"generation_batch_size={gbs} must be a multiple of per_device_train_batch_size * "
                f"world_size = {per_step}"
            )
        source = f"generation_batch_size={gbs}"
    elif spg is not None:
        gbs = per_step * spg
        source = (
            f"per_device_train_batch_size * world_size * steps_per_generation = "
            f"{kw['per_device_train_batch_size']} * {world} * {spg} = {gbs}"
        )
    else:
        gas = kw["gradient_accumulation_steps"]
        gbs = per_step * gas
        source = (
            f"per_device_train_batch_size * world_size * gradient_accumulation_steps = "
            f"{kw['per_device_train_batch_size']} * {world} * {gas} = {gbs}"
        )
    if gbs % g:
        ok = [d for d in range(2, gbs + 1) if gbs % d == 0]
        raise ConfigError(
            f"num_generations={g} does not divide the generation batch ({source}): each prompt's "
            f"{g} completions must fit in one batch; use num_generations in {ok} or grow the batch "
            f"to a multiple of {g}"
        )
    if kw.get("eval_strategy", "no") not in ("no", None):
        ge = kw.get("num_generations_eval") or g
        eval_bs = kw.get("per_device_eval_batch_size", 8) * world
        if eval_bs % ge:
            raise ConfigError(
                f"per_device_eval_batch_size * world_size = {eval_bs} is not a multiple of the "
                f"evaluation num_generations ({ge}); change one of them"
            )


def reset_accelerate_state(args: Any = None) -> None:
    """Forget accelerate's process-wide singletons (``AcceleratorState``, ``PartialState``,
    ``GradientState``) so the next trainer in this process starts from a clean state.

    Needed between trainers whose accelerate settings differ (mixed precision, device, plugins),
    which accelerate otherwise refuses or silently ignores; harmless when they are the same.

    Pass the next trainer's ``args`` (any ``transformers.TrainingArguments``, e.g. a
    ``GRPOConfig``) when they were built before this call: their device set-up is then run
    again, as transformers does it, so the process state exists when the trainer's constructor
    logs through accelerate (trl warns there before it creates its ``Accelerator``, and
    accelerate's logger raises without a process state). Without ``args`` the state stays empty
    until the next ``TrainingArguments`` or ``Accelerator`` is created.
    """
    try:
        from accelerate.state import AcceleratorState, GradientState
    except ImportError as e:
        raise MissingExtraError("llmcore.rl.reset_accelerate_state", "trl") from e
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    if args is not None:
        if not hasattr(args, "_setup_devices"):
            raise ConfigError(
                f"reset_accelerate_state(args=...) takes transformers TrainingArguments, got "
                f"{type(args).__name__}"
            )
        args.__dict__.pop("_setup_devices", None)  # a cached_property: run the set-up again
        _ = args.device


RewardFn = Callable[..., Sequence[float | None]]


def safe_reward(fn: RewardFn, *, default: float = 0.0) -> RewardFn:
    """Wrap a trl reward function so one failing completion scores ``default`` instead of
    crashing the run.

    ``fn(prompts, completions, **kwargs) -> list[float | None]`` is first called on the whole
    batch; if that raises (or returns the wrong number of rewards) it is called again one
    completion at a time, with every per-completion kwarg (a list as long as the batch) sliced to
    that completion and other kwargs (``trainer_state``, ``log_metric``...) passed unchanged; a
    completion whose call raises scores ``default``. ``None`` rewards (trl's "not applicable")
    pass through. The wrapper keeps ``__name__`` (trl names the reward column after it) and
    exposes ``errors`` (completions scored ``default`` so far), ``calls`` (batch calls) and
    ``last_error`` (``"ExcType: message"`` or ``None``); the first failure is logged as a warning.
    """
    if inspect.iscoroutinefunction(fn):
        raise ConfigError(
            f"safe_reward({getattr(fn, '__name__', fn)!r}): async reward functions are not "
            "supported; wrap a sync function or catch errors inside the coroutine"
        )

    @functools.wraps(fn)
    def wrapped(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[Any]:
        wrapped.calls += 1  # type: ignore[attr-defined]
        n = len(completions)
        try:
            out = list(fn(prompts, completions, **kwargs))
            if len(out) != n:
                raise ValueError(f"returned {len(out)} rewards for {n} completions")
            return out
        except Exception as e:  # any reward bug: retry one completion at a time
            batch_error = e
        rewards: list[Any] = []
        failed = 0
        for i in range(n):
            row = {
                k: v[i : i + 1] if isinstance(v, list | tuple) and len(v) == n else v
                for k, v in kwargs.items()
            }
            try:
                r = fn(prompts[i : i + 1], completions[i : i + 1], **row)
                r = r[0] if isinstance(r, Sequence) and not isinstance(r, str) else r
                if r is not None:
                    r = float(r)
                rewards.append(r)
            except Exception as e:
                _record(e)
                failed += 1
                rewards.append(default)
        if not failed:
            # Only the batch call failed (e.g. a vectorised step); the per-row calls all worked.
            _record(batch_error, count=False)
        return rewards

    def _record(e: BaseException, count: bool = True) -> None:
        msg = f"{type(e).__name__}: {e}"
        if count:
            wrapped.errors += 1  # type: ignore[attr-defined]
        wrapped.last_error = msg  # type: ignore[attr-defined]
        if not wrapped._warned:  # type: ignore[attr-defined]
            wrapped._warned = True  # type: ignore[attr-defined]
            log.warning(
                "reward function %s raised (%s); failing completions score %s (further errors are "
                "counted in .errors, not logged)",
                wrapped.__name__,
                msg,
                default,
            )

    wrapped.errors = 0  # type: ignore[attr-defined]
    wrapped.calls = 0  # type: ignore[attr-defined]
    wrapped.last_error = None  # type: ignore[attr-defined]
    wrapped._warned = False  # type: ignore[attr-defined]
    return wrapped


@dataclasses.dataclass(frozen=True)
class PrefilterResult(Generic[P]):
    """Outcome of :func:`pass_rate_prefilter`.

    ``rates[i]`` is the pass rate of ``prompts[i]``; ``kept``/``kept_indices``/``kept_rates`` are
    the prompts strictly inside ``(low, high)``, in input order.
    """

    kept: list[P]
    kept_indices: list[int]
    kept_rates: list[float]
    rates: list[float]
    k: int

    @property
    def n_always_solved(self) -> int:
        """Prompts all of whose ``k`` samples passed (no GRPO signal: every advantage is 0)."""
        return sum(r >= 1.0 for r in self.rates)

    @property
    def n_never_solved(self) -> int:
        """Prompts none of whose ``k`` samples passed (no GRPO signal either)."""
        return sum(r <= 0.0 for r in self.rates)


def pass_rate_prefilter(
    prompts: Sequence[P],
    sample_fn: Callable[[P, int], Sequence[str]],
    grade_fn: Callable[[P, str], bool],
    *,
    k: int = 8,
    low: float = 0.0,
    high: float = 1.0,
) -> PrefilterResult[P]:
    """Keep the prompts a policy sometimes but not always solves: the usual GRPO data filter.

    For each prompt, ``sample_fn(prompt, k)`` returns ``k`` completions and ``grade_fn(prompt,
    completion)`` says whether each passes; the pass rate is ``c / k`` (``c`` passing samples),
    the unbiased estimate of pass@1. Prompts with ``low < rate < high`` are kept: with the defaults
    all-solved and never-solved prompts are dropped, since a group of equal rewards has zero
    advantage and so no gradient. Prompts are processed in order and nothing here is random, so the
    result is deterministic whenever ``sample_fn`` is (seed it, or sample greedily).
    """
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ConfigError(f"k={k!r}: must be a positive int (samples per prompt)")
    if not 0.0 <= low < high <= 1.0:
        raise ConfigError(f"low={low}, high={high}: need 0 <= low < high <= 1")
    rates: list[float] = []
    for i, prompt in enumerate(prompts):
        samples = list(sample_fn(prompt, k))
        if len(samples) != k:
            raise DataError(
                f"sample_fn returned {len(samples)} completions for prompt {i}, expected k={k}"
            )
        c = sum(bool(grade_fn(prompt, s)) for s in samples)
        rates.append(c / k)
    idx = [i for i, r in enumerate(rates) if low < r < high]
    return PrefilterResult(
        kept=[prompts[i] for i in idx],
        kept_indices=idx,
        kept_rates=[rates[i] for i in idx],
        rates=rates,
        k=k,
    )


def write_verl_parquet(
    rows: Iterable[Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    data_source: str,
    ability: str = "math",
    split: str = "train",
    prompt_key: str = "prompt",
    answer_key: str = "answer",
    system_prompt: str | None = None,
    reward_style: str = "rule",
) -> Path:
    """Write RL prompts as a verl dataset parquet file (atomically) and return its path.

    Each output row follows verl's RL data schema::

        {"data_source": str, "prompt": [{"role": ..., "content": ...}, ...], "ability": str,
         "reward_model": {"style": "rule", "ground_truth": str},
         "extra_info": {"split": str, "index": int, ...}}

    ``row[prompt_key]`` is a string (becomes one user message, after ``system_prompt`` if given)
    or a list of chat messages; ``row[answer_key]`` is the ground truth (numbers are converted to
    str); a ``row["extra_info"]`` mapping is merged into ``extra_info``. verl picks its reward
    function by ``data_source``. Needs pyarrow (``icml26-llmcore[datasets]``).
    """
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:
        raise MissingExtraError("llmcore.rl.write_verl_parquet", "datasets") from e
    if not data_source:
        raise ConfigError("data_source is empty: verl selects the reward function by it")
    records: list[dict[str, Any]] = []
    for index, row in enumerate(rows):
        for key in (prompt_key, answer_key):
            if key not in row:
                raise DataError(f"row {index} has no {key!r} field (has {sorted(row)})")
        prompt = row[prompt_key]
        if isinstance(prompt, str):
            messages = [{"role": "user", "content": prompt}]
            if system_prompt is not None:
                messages.insert(0, {"role": "system", "content": system_prompt})
        elif isinstance(prompt, list) and all(
            isinstance(m, Mapping) and {"role", "content"} <= set(m) for m in prompt
        ):
            messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in prompt]
        else:
            raise DataError(
                f"row {index}: {prompt_key!r} must be a string or a list of "
                f"{{'role', 'content'}} messages, got {type(prompt).__name__}"
            )
        truth = row[answer_key]
        if isinstance(truth, bool) or not isinstance(truth, str | int | float):
            raise DataError(
                f"row {index}: ground truth {answer_key!r}={truth!r} must be a string or a number"
            )
        if isinstance(truth, float) and not math.isfinite(truth):
            raise DataError(f"row {index}: ground truth {answer_key!r}={truth!r} is not finite")
        extra = {**dict(row.get("extra_info") or {}), "split": split, "index": index}
        records.append(
            {
                "data_source": data_source,
                "prompt": messages,
                "ability": ability,
                "reward_model": {"style": reward_style, "ground_truth": str(truth)},
                "extra_info": extra,
            }
        )
    if not records:
        raise DataError("write_verl_parquet got no rows")
    try:
        table = pa.Table.from_pylist(records)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise DataError(f"rows do not share one schema (check extra_info value types): {e}") from e
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out
