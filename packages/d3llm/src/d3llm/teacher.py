"""Vanilla masked-diffusion SFT (LLaDA's objective), used to build the CPU teacher."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from d3llm.errors import D3LLMConfigError


def train_vanilla_mdlm(
    m: Any,
    tokenizer: Any,
    dataset: Sequence[str],
    steps: int,
    lr: float = 3e-3,
    batch_size: int = 32,
    seed: int = 0,
    *,
    marker: str = "=",
    max_length: int = 64,
    warmup_steps: int = 50,
    progress: bool = False,
) -> dict[str, float]:
    """Train ``m`` (a :class:`~d3llm.model.MaskedDiffusionLM`) in place on documents
    ``prompt + marker + response``: per sequence t ~ U(eps, 1), each response token masked with
    probability t, cross-entropy on the masked tokens weighted by 1/t (LLaDA SFT, the prompt
    never masked). AdamW with warm-up and cosine decay (``llmcore.zoo.train.train_lm``)."""
    from llmcore.zoo import TrainSpec
    from llmcore.zoo.train import completion_loss, train_lm

    if steps <= 0:
        raise D3LLMConfigError(f"steps must be positive, got {steps}")
    ids = tokenizer(marker, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        raise D3LLMConfigError(f"the marker {marker!r} must be one token, got {ids}")
    spec = TrainSpec(
        objective="masked_diffusion",
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        warmup_steps=min(warmup_steps, steps),
        max_length=max_length,
        seed=seed,
    )
    loss = completion_loss(ids[0], objective="masked_diffusion", mask_token_id=m.mask_token_id)
    m.model.train()
    stats = train_lm(m.model, tokenizer, list(dataset), spec, loss_fn=loss, progress=progress)
    m.model.eval()
    return stats
