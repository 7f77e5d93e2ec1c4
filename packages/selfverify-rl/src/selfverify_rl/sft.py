"""Warm-up SFT for hub models through ``trl.SFTTrainer`` (prompt-completion pairs, loss on the
completion only), the counterpart of the tiny model's ``llmcore.zoo`` warm-up.

The pairs come from the same corpus as the tiny warm-up (generation scratchpads plus recompute
and verdict-only verification responses, rendered in the plain or chat prompt style), or from
any ``prompt``/``completion`` rows. ``peft_config`` (extra ``peft``) trains a LoRA adapter
instead of all weights.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["sft_warmup", "warmup_pairs"]


def warmup_pairs(
    spec: Any = None,
    *,
    style: str = "plain",
    tokenizer: Any = None,
    exclude: Iterable[str] = (),
) -> list[dict[str, str]]:
    """The warm-up corpus of :func:`selfverify_rl.warmup.warmup_corpus` as ``prompt``/``completion``
    pairs, with prompts in ``style`` (``"chat"`` renders through ``tokenizer``'s template).

    ``spec`` is a :class:`selfverify_rl.warmup.WarmupSpec` (default: the calibrated one);
    ``exclude`` keeps held-out questions out."""
    from selfverify_rl.prompts import (
        PLAIN_GEN_PREFIX,
        PLAIN_GEN_SUFFIX,
        PLAIN_VER_MID,
        PLAIN_VER_PREFIX,
        PLAIN_VER_SUFFIX,
        generation_prompt,
        verification_prompt,
    )
    from selfverify_rl.warmup import WarmupSpec, warmup_corpus

    spec = WarmupSpec() if spec is None else spec
    pairs = []
    for doc in warmup_corpus(spec, exclude=set(exclude)):
        line, _, completion = doc.partition("\n")
        if line.startswith(PLAIN_GEN_PREFIX):
            q = line[len(PLAIN_GEN_PREFIX) : len(line) - len(PLAIN_GEN_SUFFIX) + 1]
            prompt = generation_prompt(q, style, tokenizer)
        else:
            body = line[len(PLAIN_VER_PREFIX) : len(line) - len(PLAIN_VER_SUFFIX) + 1]
            q, _, cand = body.partition(PLAIN_VER_MID)
            prompt = verification_prompt(q, cand, style, tokenizer)
        pairs.append({"prompt": prompt, "completion": completion})
    return pairs


def sft_warmup(
    model: Any,
    tokenizer: Any,
    pairs: Sequence[Mapping[str, str]],
    *,
    output_dir: str | None = None,
    max_steps: int = 300,
    learning_rate: float = 1e-5,
    batch_size: int = 8,
    max_length: int = 512,
    seed: int = 0,
    peft_config: Any = None,
    **sft_overrides: Any,
) -> Any:
    """Supervised warm-up of ``model`` on ``pairs`` with ``trl.SFTTrainer`` (completion-only
    loss, EOS appended, fp32 on CPU and bf16 on CUDA unless overridden); returns the trainer
    (the trained model is ``trainer.model``). ``sft_overrides`` set any ``trl.SFTConfig``
    field. A tiny model's BOS prefix is added to plain prompts when its tokenizer lacks one."""
    import tempfile

    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from llmcore.rl import reset_accelerate_state
    from selfverify_rl.errors import SelfVerifyConfigError, SelfVerifyDataError
    from selfverify_rl.evaluate import model_prefix

    if not pairs:
        raise SelfVerifyDataError("sft_warmup: no pairs; give prompt/completion rows")
    bad = [i for i, p in enumerate(pairs) if not p.get("prompt") or not p.get("completion")]
    if bad:
        raise SelfVerifyDataError(
            f"sft_warmup: rows {bad[:5]} lack a non-empty 'prompt' or 'completion'"
        )
    if max_steps < 1:
        raise SelfVerifyConfigError(f"max_steps={max_steps}: use at least 1")
    on_gpu = torch.cuda.is_available() and not sft_overrides.get("use_cpu", False)
    if sft_overrides.get("bf16") and not on_gpu:
        raise SelfVerifyConfigError("bf16=True on CPU: use use_cpu=True, bf16=False (fp32)")
    pre = model_prefix(tokenizer)
    rows = [
        {
            "prompt": p["prompt"] if p["prompt"].startswith(pre) else pre + p["prompt"],
            "completion": p["completion"],
        }
        for p in pairs
    ]
    kw: dict[str, Any] = {
        "output_dir": output_dir or tempfile.mkdtemp(prefix="selfverify-sft-"),
        "max_steps": max_steps,
        "learning_rate": learning_rate,
        "per_device_train_batch_size": batch_size,
        "max_length": max_length,
        "seed": seed,
        "completion_only_loss": True,
        "use_cpu": not on_gpu,
        "bf16": on_gpu,
        "report_to": [],
        "save_strategy": "no",
        "logging_steps": 1,
        "lr_scheduler_type": "cosine",
        "warmup_steps": min(50, max_steps // 10),
    }
    kw.update(sft_overrides)
    reset_accelerate_state()
    trainer = SFTTrainer(
        model=model,
        args=SFTConfig(**kw),
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    trainer.train()
    return trainer
