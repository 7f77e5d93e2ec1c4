"""GRPO on simulator QA with trl's ``GRPOTrainer`` (presets ``"official"`` and ``"tiny"``),
the offline pass-rate prefilter, and an SFT warm start for hub models.

``"official"`` maps the paper's verl DAPO/GSPO recipe (Sec. 3.6) onto trl: sequence-level
importance ratios (GSPO), clip 3e-4 / 4e-4, KL coefficient 0.001 against a reference model,
lr 1e-6 with 10 warm-up steps, weight decay 0.1, grad clip 1.0, 16 samples per prompt at
T = 1, top-p 1. trl has no dynamic sampling; :func:`prefilter_by_pass_rate` drops the prompts
whose groups would carry no gradient before training instead. ``"tiny"`` is the CPU setting
used by the tests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sim2reason.errors import ConfigError

__all__ = [
    "PRESETS",
    "grpo_config",
    "make_reward",
    "prefilter_by_pass_rate",
    "sft_warm_start",
    "train_grpo",
]

PRESETS: dict[str, dict[str, Any]] = {
    "official": {
        "importance_sampling_level": "sequence",
        "loss_type": "grpo",
        "epsilon": 3e-4,
        "epsilon_high": 4e-4,
        "beta": 0.001,
        "num_generations": 16,
        "per_device_train_batch_size": 16,
        "gradient_accumulation_steps": 32,
        "max_completion_length": 16384,
        "temperature": 1.0,
        "top_p": 1.0,
        "learning_rate": 1e-6,
        "lr_scheduler_type": "constant_with_warmup",
        "warmup_steps": 10,
        "weight_decay": 0.1,
        "max_grad_norm": 1.0,
    },
    "tiny": {
        "importance_sampling_level": "token",
        "loss_type": "dapo",
        "epsilon": 0.2,
        "beta": 0.0,
        "num_generations": 8,
        "per_device_train_batch_size": 64,
        "gradient_accumulation_steps": 1,
        "max_completion_length": 48,
        "temperature": 1.0,
        "top_p": 1.0,
        "learning_rate": 1e-5,
        "lr_scheduler_type": "constant",
        "warmup_steps": 0,
        "max_steps": 60,
    },
}


def grpo_config(preset: str = "tiny", output_dir: str | None = None, **overrides: Any) -> Any:
    """A ``trl.GRPOConfig`` for ``preset`` with ``overrides`` on top.

    On CPU (the default, ``use_cpu`` unset or true) it goes through
    ``llmcore.rl.cpu_grpo_config`` (fp32, nothing saved or reported, batch rules checked); with
    ``use_cpu=False`` (a GPU, e.g. with ``use_vllm=True``) it builds ``trl.GRPOConfig`` with
    bf16 directly.
    """
    if preset not in PRESETS:
        raise ConfigError(f"preset={preset!r}: use one of {sorted(PRESETS)}")
    kw = {**PRESETS[preset], **overrides}
    if kw.get("use_cpu", True):
        from llmcore.rl import cpu_grpo_config

        kw.pop("use_cpu", None)
        return cpu_grpo_config(output_dir, **kw)
    import tempfile

    from llmcore.rl import _require_trl

    trl = _require_trl("sim2reason.train.grpo_config")
    base = {"bf16": True, "report_to": [], "save_strategy": "no", "logging_steps": 1}
    return trl.GRPOConfig(output_dir=output_dir or tempfile.mkdtemp(prefix="s2r-grpo-"),
                          **{**base, **kw})  # fmt: skip


def make_reward(rel: float = 0.05, thr: float = 0.01, math_verify: bool = False) -> Callable:
    """The trl reward function (5 % rule, binary), wrapped by ``llmcore.rl.safe_reward``."""
    from llmcore.rl import safe_reward
    from sim2reason.rewards import sim2reason_reward

    def sim2reason_5pct(prompts: Sequence[Any], completions: Sequence[Any], answer: Sequence[Any],
                        kind: Any = "numeric", given_variable_mapping: Any = None,
                        **kwargs: Any) -> list[float]:  # fmt: skip
        return sim2reason_reward(completions, answer, kind, given_variable_mapping, rel=rel,
                                 thr=thr, math_verify=math_verify)  # fmt: skip

    return safe_reward(sim2reason_5pct)


def train_grpo(model: Any, tokenizer: Any, train_ds: Any, eval_ds: Any = None, cfg: Any = None,
               *, reward_funcs: Sequence[Callable] | None = None) -> Any:  # fmt: skip
    """Run ``trl.GRPOTrainer`` on a dataset with ``prompt`` and ``answer`` columns (``kind`` and
    ``given_variable_mapping`` optional) and return the trained model.

    ``cfg`` defaults to ``grpo_config("tiny")``. accelerate's process state is reset first, so
    several trainers can run in one process.
    """
    from llmcore.rl import _require_trl, reset_accelerate_state

    trl = _require_trl("sim2reason.train.train_grpo")
    if "prompt" not in train_ds.column_names or "answer" not in train_ds.column_names:
        raise ConfigError(
            f"train_ds needs 'prompt' and 'answer' columns, has {train_ds.column_names}"
        )
    cfg = cfg or grpo_config("tiny")
    reset_accelerate_state(cfg)  # cfg was built before: its device set-up runs again
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=list(reward_funcs or [make_reward()]),
        args=cfg,
        train_dataset=train_ds,
        eval_dataset=eval_ds,
        processing_class=tokenizer,
    )
    trainer.train()
    model = trainer.model
    model.sim2reason_log_history = list(trainer.state.log_history)
    reset_accelerate_state()
    return model


def _sample(model: Any, tokenizer: Any, prompts: Sequence[str], k: int, temperature: float,
            max_new_tokens: int, batch_size: int, seed: int) -> list[list[str]]:  # fmt: skip
    from llmcore.generation import HFBackend, SamplingParams

    backend = HFBackend(model, tokenizer, batch_size=batch_size, progress=False)
    params = SamplingParams(n=k, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed)
    return [[o.text for o in outs] for outs in backend.generate(list(prompts), params)]


def prefilter_by_pass_rate(model: Any, tokenizer: Any, ds: Any, k: int = 8, *,
                           temperature: float = 1.0, max_new_tokens: int = 48,
                           batch_size: int = 64, seed: int = 0, low: float = 0.0,
                           high: float = 1.0) -> tuple[Any, Any]:  # fmt: skip
    """Keep the prompts the policy solves sometimes but not always at the rollout temperature
    (0 < pass@k < 1): the offline stand-in for DAPO's dynamic sampling, through
    ``llmcore.rl.pass_rate_prefilter``. Returns ``(filtered dataset, PrefilterResult)``.

    String prompts are sampled as they are; chat prompts through the tokenizer's template.
    """
    from llmcore.rl import pass_rate_prefilter
    from sim2reason.rewards import check_answer

    rows = list(ds)
    texts = [_prompt_text(tokenizer, r["prompt"]) for r in rows]
    samples = _sample(model, tokenizer, texts, k, temperature, max_new_tokens, batch_size, seed)
    result = pass_rate_prefilter(
        list(range(len(rows))),
        lambda i, _k: samples[i],
        lambda i, s: check_answer(s, rows[i]["answer"], rows[i].get("kind", "numeric"),
                                  rows[i].get("given_variable_mapping"))["reward"] == 1.0,
        k=k, low=low, high=high,
    )  # fmt: skip
    return ds.select(result.kept_indices), result


def _prompt_text(tokenizer: Any, prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    return tokenizer.apply_chat_template(list(prompt), tokenize=False, add_generation_prompt=True)


def sft_warm_start(model: Any, tokenizer: Any, ds: Any, *, max_steps: int = 100,
                   learning_rate: float = 1e-5, output_dir: str | None = None,
                   **overrides: Any) -> Any:  # fmt: skip
    """Supervised warm start for a hub model with trl's ``SFTTrainer`` on ``prompt`` /
    ``completion`` rows (completion-only loss), before GRPO."""
    import tempfile

    from llmcore.rl import _require_trl, reset_accelerate_state

    trl = _require_trl("sim2reason.train.sft_warm_start")
    reset_accelerate_state()
    args = trl.SFTConfig(
        output_dir=output_dir or tempfile.mkdtemp(prefix="s2r-sft-"),
        max_steps=max_steps, learning_rate=learning_rate, report_to=[], save_strategy="no",
        logging_steps=10, completion_only_loss=True, **overrides,
    )  # fmt: skip
    trainer = trl.SFTTrainer(model=model, args=args, train_dataset=ds, processing_class=tokenizer)
    trainer.train()
    reset_accelerate_state()
    return trainer.model
