"""Training arms: SFT on canonical traces, GRPO on outcome reward, rejection-sampling FT, protocol.

* SFT imitates canonical traces (loss on completion tokens only): ``trl.SFTTrainer`` on
  prompt-completion data (:func:`run_sft`), or llmcore's zoo trainer for the cached CPU fixture.
* RL: GRPO with advantages ``A_i = (r_i - mean_g r) / (std_g r + eps)`` on the binary
  exact-match reward (no trace supervision; step accuracy logged at weight 0), optional dynamic
  sampling as an offline pass-rate prefilter (keep 0 < pass@k < 1) (:func:`run_grpo`).
* RFT: sample from the SFT model on the RL prompts with the RL arm's sample budget, keep the
  correct traces and fine-tune on them (:func:`run_rft`), the next-token-prediction control.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from compgen_rl.errors import CompgenError

__all__ = [
    "GRPOArgs",
    "ProtocolConfig",
    "RFTArgs",
    "SFTArgs",
    "grpo_config",
    "prefilter_rows",
    "run_grpo",
    "run_protocol",
    "run_rft",
    "run_sft",
]


def _rows(ds: Any) -> list[dict[str, Any]]:
    return ds if isinstance(ds, list) else [dict(r) for r in ds]


def _is_cpu(model: Any) -> bool:
    try:
        return next(model.parameters()).device.type == "cpu"
    except (StopIteration, AttributeError):
        return True


# --- SFT -------------------------------------------------------------------------------------


@dataclass
class SFTArgs:
    """Supervised fine-tuning on canonical traces (trl ``SFTTrainer``)."""

    steps: int = 1000
    """Optimiser steps."""
    lr: float = 1e-3
    """Peak learning rate (cosine schedule after warm-up)."""
    batch_size: int = 64
    """Sequences per step."""
    warmup_steps: int = 50
    """Linear warm-up steps."""
    max_length: int = 512
    """Longest prompt + completion in tokens."""
    bf16: bool = False
    """Mixed precision (GPU only; on CPU keep False)."""
    seed: int = 0
    """Trainer seed."""


def _check_precision(bf16: bool, model: Any) -> None:
    if bf16 and _is_cpu(model):
        raise CompgenError(
            "bf16=True with a model on CPU: trl's bf16 default fails or crawls there; train on CPU with "
            "use_cpu=True, bf16=False (fp32), or move the model to a GPU"
        )


def run_sft(
    model: Any,
    tokenizer: Any,
    ds: Any,
    cfg: SFTArgs | None = None,
    *,
    output_dir: str | None = None,
    peft_config: Any = None,
) -> Any:
    """SFT with ``trl.SFTTrainer`` on prompt-completion pairs (completion-only loss); returns the
    trained model. The prompt gets the tokenizer's BOS text as at generation time."""
    import tempfile

    import trl
    from datasets import Dataset

    from compgen_rl.evaluate import model_prompts

    cfg = cfg or SFTArgs()
    _check_precision(cfg.bf16, model)
    rows = _rows(ds)
    if not rows:
        raise CompgenError("run_sft got no examples")
    data = Dataset.from_dict(
        {
            "prompt": model_prompts(tokenizer, [r["prompt"] for r in rows]),
            "completion": [r["completion"] for r in rows],
        }
    )
    cpu = _is_cpu(model)
    args = trl.SFTConfig(
        output_dir=output_dir or tempfile.mkdtemp(prefix="compgen-sft-"),
        max_steps=cfg.steps,
        learning_rate=cfg.lr,
        lr_scheduler_type="cosine",
        warmup_steps=cfg.warmup_steps,
        per_device_train_batch_size=cfg.batch_size,
        max_length=cfg.max_length,
        completion_only_loss=True,
        use_cpu=cpu,
        bf16=cfg.bf16,
        fp16=False,
        report_to="none",
        save_strategy="no",
        logging_steps=10,
        disable_tqdm=True,
        seed=cfg.seed,
        dataloader_pin_memory=False,
        packing=False,
    )
    _reset(args)  # a clean process state for this trainer, set up from its own config
    trainer = trl.SFTTrainer(
        model=model,
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
        peft_config=_peft(peft_config),
    )
    trainer.train()
    _reset()
    return trainer.model.eval()


def _peft(peft_config: Any) -> Any:
    """Check that a LoRA/PEFT config can be used (optional extra ``compgen-rl[peft]``)."""
    if peft_config is None:
        return None
    try:
        import peft  # noqa: F401
    except ImportError as e:
        raise CompgenError(
            "peft_config needs the optional extra: pip install 'compgen-rl[peft]'"
        ) from e
    return peft_config


def _reset(args: Any = None) -> None:
    """Forget accelerate's process-wide state (``llmcore.rl.reset_accelerate_state``). Pass the
    next trainer's config when it was built before this call: its device set-up is run again, so
    the trainer's constructor can log through accelerate (trl warns there before it creates its
    ``Accelerator``; after a plain reset that raises "You must initialize the accelerate state")."""
    from llmcore.rl import reset_accelerate_state

    reset_accelerate_state(args)


# --- GRPO ------------------------------------------------------------------------------------


@dataclass
class GRPOArgs:
    """GRPO on the exact-match reward (defaults: the CPU recipe measured on the routing-context split)."""

    steps: int = 60
    """Optimiser steps."""
    prompts_per_step: int = 8
    """Prompts per step (each gets num_generations completions)."""
    num_generations: int = 8
    """Completions per prompt (the GRPO group)."""
    lr: float = 5e-5
    """Constant learning rate."""
    beta: float = 0.0
    """KL coefficient (0: no reference model)."""
    loss_type: str = "dapo"
    """trl loss aggregation: dapo, grpo, dr_grpo, bnpo, ..."""
    epsilon: float = 0.2
    """PPO clip range."""
    temperature: float = 1.0
    """Rollout temperature."""
    max_completion_length: int = 28
    """Longest sampled completion in tokens."""
    prefilter: bool = True
    """Dynamic sampling, offline: keep RL prompts with 0 < pass@k < 1 under the starting model."""
    prefilter_k: int = 8
    """Samples per prompt for the prefilter."""
    use_vllm: bool = False
    """Generate rollouts with vLLM (GPU only)."""
    bf16: bool = False
    """Mixed precision (GPU only)."""
    seed: int = 0
    """Trainer and sampling seed."""

    def __post_init__(self) -> None:
        if self.num_generations < 2:
            raise CompgenError(
                f"num_generations={self.num_generations}: GRPO needs >= 2 completions per prompt"
            )
        if self.steps < 1 or self.prompts_per_step < 1:
            raise CompgenError(
                f"steps={self.steps} and prompts_per_step={self.prompts_per_step} must be >= 1"
            )


def grpo_config(
    cfg: GRPOArgs, *, cpu: bool = True, output_dir: str | None = None, batch_size: int | None = None
) -> Any:
    """The ``trl.GRPOConfig``: ``llmcore.rl.cpu_grpo_config`` on CPU (fp32, nothing saved),
    a plain ``GRPOConfig`` on an accelerator. ``batch_size`` (completions per step) defaults to
    ``prompts_per_step * num_generations`` and must be divisible by ``num_generations``."""
    bs = batch_size if batch_size is not None else cfg.prompts_per_step * cfg.num_generations
    if bs % cfg.num_generations:
        raise CompgenError(
            f"num_generations={cfg.num_generations} does not divide the batch of {bs} completions; "
            f"use a batch that is a multiple of {cfg.num_generations}"
        )
    kw: dict[str, Any] = dict(
        per_device_train_batch_size=bs,
        num_generations=cfg.num_generations,
        max_completion_length=cfg.max_completion_length,
        learning_rate=cfg.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        beta=cfg.beta,
        loss_type=cfg.loss_type,
        epsilon=cfg.epsilon,
        temperature=cfg.temperature,
        max_steps=cfg.steps,
        seed=cfg.seed,
        reward_weights=[1.0, 0.0],
        logging_steps=1,
    )
    if cpu:
        if cfg.bf16:
            raise CompgenError(
                "bf16=True on CPU: set use_cpu=True, bf16=False (fp32) for CPU training, or run on a GPU"
            )
        if cfg.use_vllm:
            raise CompgenError("use_vllm=True needs a GPU; generate with the model itself on CPU")
        from llmcore.rl import cpu_grpo_config

        return cpu_grpo_config(output_dir, **kw)
    import tempfile

    import trl

    return trl.GRPOConfig(
        output_dir=output_dir or tempfile.mkdtemp(prefix="compgen-grpo-"),
        bf16=cfg.bf16,
        report_to="none",
        save_strategy="no",
        use_vllm=cfg.use_vllm,
        vllm_mode="colocate",
        **kw,
    )


def _timed(fn: Any, bucket: dict[str, float], key: str) -> Any:
    import functools

    @functools.wraps(fn)
    def inner(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            bucket[key] = bucket.get(key, 0.0) + time.perf_counter() - t0

    return inner


def run_grpo(
    model: Any,
    tokenizer: Any,
    ds: Any,
    cfg: GRPOArgs | None = None,
    *,
    output_dir: str | None = None,
    peft_config: Any = None,
) -> tuple[Any, dict[str, Any]]:
    """GRPO (``trl.GRPOTrainer``) on RL prompts with the exact-match reward; returns the model
    and statistics: ``frac_reward_zero_std`` first/last/mean, train reward first/last, loss,
    seconds split into generation+scoring / reward / update, rollout share. ``peft_config``
    (e.g. ``peft.LoraConfig``) trains an adapter instead of all weights."""
    import trl
    from datasets import Dataset

    from compgen_rl.evaluate import model_prompts
    from compgen_rl.rewards import trl_reward_funcs

    cfg = cfg or GRPOArgs()
    rows = _rows(ds)
    if len(rows) < cfg.prompts_per_step:
        raise CompgenError(
            f"run_grpo got {len(rows)} RL prompt(s), fewer than prompts_per_step="
            f"{cfg.prompts_per_step}: trl would train 0 steps. If the pass-rate prefilter dropped "
            "them, the starting model never (or always) solves these prompts"
        )
    cpu = _is_cpu(model)
    args = grpo_config(cfg, cpu=cpu, output_dir=output_dir)
    data = Dataset.from_dict(
        {
            "prompt": model_prompts(tokenizer, [r["prompt"] for r in rows]),
            "answer": [r["answer"] for r in rows],
            "program": [r["program"] for r in rows],
            "input": [r["input"] for r in rows],
        }
    )
    funcs, _ = trl_reward_funcs()
    timing: dict[str, float] = {}
    funcs = [_timed(f, timing, "reward") for f in funcs]
    _reset(args)  # a clean process state for this trainer, set up from its own config
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=funcs,
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
        peft_config=_peft(peft_config),
    )
    if hasattr(trainer, "_generate_and_score_completions"):
        trainer._generate_and_score_completions = _timed(
            trainer._generate_and_score_completions, timing, "rollout"
        )
    t0 = time.perf_counter()
    trainer.train()
    total = time.perf_counter() - t0
    _reset()
    hist = [h for h in trainer.state.log_history if "frac_reward_zero_std" in h]
    zs = [h["frac_reward_zero_std"] for h in hist]
    rw = [h.get("rewards/exact_match/mean", h.get("reward", 0.0)) for h in hist]
    rollout = timing.get("rollout", 0.0)
    stats = {
        "steps": len(hist),
        "frac_reward_zero_std_first": zs[0] if zs else None,
        "frac_reward_zero_std_last": zs[-1] if zs else None,
        "frac_reward_zero_std_mean": sum(zs) / len(zs) if zs else None,
        "reward_first": rw[0] if rw else None,
        "reward_last": rw[-1] if rw else None,
        "loss_last": hist[-1].get("loss") if hist else None,
        "seconds": total,
        "seconds_generation": max(rollout - timing.get("reward", 0.0), 0.0),
        "seconds_reward": timing.get("reward", 0.0),
        "seconds_update": max(total - rollout, 0.0),
        "rollout_share": rollout / total if total else None,
        "n_prompts": len(rows),
        "completions": len(hist) * args.per_device_train_batch_size,
        "mean_completion_tokens": (
            sum(h.get("completions/mean_length", 0.0) for h in hist) / len(hist) if hist else None
        ),
    }
    return trainer.model.eval(), stats


def prefilter_rows(
    model: Any,
    tokenizer: Any,
    rows: Sequence[dict[str, Any]],
    *,
    k: int = 8,
    temperature: float = 1.0,
    seed: int = 0,
    max_new_tokens: int = 28,
    batch_size: int = 128,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Dynamic sampling done offline: sample ``k`` completions per RL prompt from the starting
    model (batched), grade them by exact match and keep prompts with ``0 < pass < 1``
    (``llmcore.rl.pass_rate_prefilter``). Returns the kept rows and the statistics."""
    from compgen_rl.evaluate import generate
    from compgen_rl.rewards import exact_match_reward
    from llmcore.rl import pass_rate_prefilter

    rows = list(rows)
    t0 = time.perf_counter()
    samples = generate(
        model,
        tokenizer,
        [r["prompt"] for r in rows],
        n=k,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        batch_size=batch_size,
        seed=seed,
    )
    res = pass_rate_prefilter(
        list(range(len(rows))),
        lambda i, kk: samples[i][:kk],
        lambda i, c: exact_match_reward([c], [rows[i]["answer"]])[0] == 1.0,
        k=k,
    )
    kept = [rows[i] for i in res.kept_indices]
    stats = {
        "n": len(rows),
        "kept": len(kept),
        "mean_pass_all": sum(res.rates) / max(len(rows), 1),
        "mean_pass_kept": sum(res.kept_rates) / max(len(kept), 1),
        "never": res.n_never_solved,
        "always": res.n_always_solved,
        "seconds": time.perf_counter() - t0,
        "k": k,
    }
    return kept, stats


# --- RFT -------------------------------------------------------------------------------------


@dataclass
class RFTArgs:
    """Rejection-sampling fine-tuning with the RL arm's sample budget (steps x batch completions)."""

    samples: int = 3840
    """Completions sampled in all (GRPO default: 60 steps x 64)."""
    samples_per_prompt: int = 8
    """Completions per RL prompt."""
    temperature: float = 1.0
    """Sampling temperature."""
    steps: int = 60
    """Fine-tuning steps on the kept traces."""
    batch_size: int = 64
    """Sequences per fine-tuning step."""
    lr: float = 5e-5
    """Learning rate (warm-up-free cosine to 10 %)."""
    max_new_tokens: int = 28
    """Longest sampled completion."""
    seed: int = 0
    """Sampling and training seed."""


def run_rft(
    model: Any, tokenizer: Any, ds: Any, cfg: RFTArgs | None = None
) -> tuple[Any, dict[str, Any]]:
    """Sample ``samples_per_prompt`` completions for ``samples // samples_per_prompt`` RL prompts,
    keep the distinct correct ones and fine-tune on them (completion-only loss). Returns the
    model and statistics (kept traces, pass rate, seconds)."""
    from compgen_rl.evaluate import generate, model_prompts
    from compgen_rl.rewards import exact_match_reward
    from llmcore.zoo.recipes import TrainSpec
    from llmcore.zoo.train import completion_loss, train_lm

    cfg = cfg or RFTArgs()
    rows = _rows(ds)
    n_prompts = min(len(rows), max(1, cfg.samples // cfg.samples_per_prompt))
    rows = rows[:n_prompts]
    t0 = time.perf_counter()
    samples = generate(
        model,
        tokenizer,
        [r["prompt"] for r in rows],
        n=cfg.samples_per_prompt,
        temperature=cfg.temperature,
        max_new_tokens=cfg.max_new_tokens,
        seed=cfg.seed,
    )
    docs: list[str] = []
    n_ok = 0
    for r, outs in zip(rows, samples, strict=True):
        ok = exact_match_reward(outs, [r["answer"]] * len(outs))
        n_ok += int(sum(ok))
        for c in sorted({o.strip() + "\n" for o, g in zip(outs, ok, strict=True) if g}):
            docs.append(r["prompt"] + c)
    stats: dict[str, Any] = {
        "prompts": n_prompts,
        "samples": n_prompts * cfg.samples_per_prompt,
        "pass_rate": n_ok / max(n_prompts * cfg.samples_per_prompt, 1),
        "kept_traces": len(docs),
    }
    if docs:
        bos = (tokenizer.bos_token or "") if model_prompts(tokenizer, ["x"])[0] != "x" else ""
        newline = tokenizer.convert_tokens_to_ids(tokenizer.tokenize("\n"))[0]
        spec = TrainSpec(
            steps=cfg.steps,
            batch_size=cfg.batch_size,
            lr=cfg.lr,
            warmup_steps=0,
            max_length=128,
            seed=cfg.seed,
            weight_decay=0.0,
        )
        del bos  # encode_documents adds the BOS id itself
        stats.update(
            train_lm(model, tokenizer, docs, spec, loss_fn=completion_loss(newline), progress=False)
        )
    stats["seconds"] = time.perf_counter() - t0
    return model.eval(), stats


# --- protocol --------------------------------------------------------------------------------


@dataclass
class ProtocolConfig:
    """One run of the protocol: SFT, then SFT->RL, SFT->RFT and the RL-data ablations, evaluated
    on the same prompts (fixed seeds), one JSON report."""

    model: str = "tiny"
    """'tiny' (the cached 2x128 Llama SFT fixture) or an HF id / path to fine-tune with SFTTrainer."""
    split: dict[str, Any] = field(default_factory=dict)
    """SplitConfig fields (default: the routing-context CPU split)."""
    sft: dict[str, Any] = field(default_factory=dict)
    """SFTArgs fields (HF models only)."""
    grpo: dict[str, Any] = field(default_factory=dict)
    """GRPOArgs fields (with model 'tiny', over the claim arm's settings: lr 2e-5)."""
    rft: dict[str, Any] = field(default_factory=dict)
    """RFTArgs fields."""
    arms: tuple[str, ...] = ("sft", "sft_rl", "sft_rft")
    """Arms to run: sft, sft_rl, sft_rft, rl_atomic, rl_overlap."""
    eval_splits: tuple[str, ...] = ("test_seen", "test_unseen", "test_ood", "probe_atomic")
    """Splits every arm is evaluated on."""
    backend: Literal["hf", "vllm"] = "hf"
    """Evaluation backend."""
    out: str = "protocol.json"
    """Where the JSON report goes."""

    def __post_init__(self) -> None:
        self.arms = tuple(self.arms)
        self.eval_splits = tuple(self.eval_splits)
        bad = [
            a for a in self.arms if a not in ("sft", "sft_rl", "sft_rft", "rl_atomic", "rl_overlap")
        ]
        if bad:
            raise CompgenError(
                f"unknown arm(s) {bad}; use sft, sft_rl, sft_rft, rl_atomic, rl_overlap"
            )


def run_protocol(cfg: ProtocolConfig) -> dict[str, Any]:
    """Run every arm of ``cfg`` and write the report; returns it (metrics per arm and split,
    gains over SFT, training statistics)."""
    from compgen_rl.data import SplitConfig
    from compgen_rl.evaluate import evaluate
    from compgen_rl.tiny import build_rft_arm, build_rl_arm, build_sft, split_rows
    from llmcore.data import atomic_write_json

    split = (
        SplitConfig.routing_context_cpu(**cfg.split)
        if cfg.model == "tiny"
        else SplitConfig(**cfg.split)
    )
    if cfg.model == "tiny":
        from compgen_rl.tiny import CLAIM_GRPO

        grpo = GRPOArgs(**{**CLAIM_GRPO, **cfg.grpo})
    else:
        grpo = GRPOArgs(**cfg.grpo)
    rft = RFTArgs(**cfg.rft)
    rows, meta = split_rows(split)
    report: dict[str, Any] = {
        "config": asdict(cfg),
        "split": meta["config"],
        "heldout_events": meta["heldout_events"],
        "arms": {},
        "train": {},
    }
    if cfg.model == "tiny":
        sft_entry = build_sft(split)
        base = sft_entry.load
        report["train"]["sft"] = dict(sft_entry.metrics)
    else:
        from llmcore import load_model_and_tokenizer

        model, tok = load_model_and_tokenizer(cfg.model)
        model = run_sft(model, tok, rows["sft"], SFTArgs(**cfg.sft))

        def base() -> tuple[Any, Any]:
            import copy

            return copy.deepcopy(model), tok

    def arm_model(name: str) -> tuple[Any, Any]:
        if name == "sft":
            return base()
        if cfg.model == "tiny" and name == "sft_rl":
            e = build_rl_arm(sft_entry, split, grpo)
            report["train"][name] = dict(e.metrics)
            return e.load()
        if cfg.model == "tiny" and name == "sft_rft":
            e = build_rft_arm(sft_entry, split, rft)
            report["train"][name] = dict(e.metrics)
            return e.load()
        m, t = base()
        if name == "sft_rft":
            m, st = run_rft(m, t, rows["rl"], rft)
        else:
            src = rows["rl"]
            if name in ("rl_atomic", "rl_overlap"):
                alt = SplitConfig(
                    **{
                        **meta["config"],
                        "rl_data": name.split("_")[1],
                        "holdout_events": tuple(meta["config"]["holdout_events"] or ()) or None,
                        "context_routings": tuple(meta["config"]["context_routings"]),
                    }
                )
                src = split_rows(alt)[0]["rl"]
            if grpo.prefilter:
                src, pf = prefilter_rows(
                    m,
                    t,
                    src,
                    k=grpo.prefilter_k,
                    temperature=grpo.temperature,
                    seed=grpo.seed,
                    max_new_tokens=grpo.max_completion_length,
                )
                report["train"][f"{name}_prefilter"] = pf
            if len(src) < grpo.prompts_per_step:
                report["train"][name] = {
                    "skipped": f"the prefilter kept {len(src)} prompt(s) (< {grpo.prompts_per_step}): "
                    "no informative group, the arm is the SFT model"
                }
                return m, t
            m, st = run_grpo(m, t, src, grpo)
        report["train"][name] = st
        return m, t

    for name in cfg.arms:
        m, t = arm_model(name)
        report["arms"][name] = {
            s: _strip(evaluate(m, t, rows[s], backend=cfg.backend)) for s in cfg.eval_splits
        }
    if "sft" in report["arms"]:
        for name, res in report["arms"].items():
            if name != "sft":
                res["gain"] = {
                    s: res[s]["acc"] - report["arms"]["sft"][s]["acc"] for s in cfg.eval_splits
                }
    out = Path(cfg.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out, report)
    return report


def _strip(res: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in res.items() if k not in ("correct", "step", "signature")}
