"""Building and training the tiny decoders of the zoo (also usable on any small HF model)."""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from llmcore.errors import ConfigError
from llmcore.zoo.recipes import ModelSpec, TrainSpec

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)


def build_model(spec: ModelSpec, tokenizer: PreTrainedTokenizerBase, *, seed: int = 0):
    """A randomly initialised ``LlamaForCausalLM``/``Qwen2ForCausalLM`` for ``spec``, float32."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    common: dict[str, Any] = dict(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads or spec.num_heads,
        intermediate_size=spec.intermediate_size,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=spec.tie_word_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": spec.rope_theta},
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    cfg_cls, model_cls = {
        "llama": (LlamaConfig, LlamaForCausalLM),
        "qwen2": (Qwen2Config, Qwen2ForCausalLM),
    }[spec.arch]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(cfg_cls(**common))
    return model.float()


def encode_documents(
    tokenizer: PreTrainedTokenizerBase, docs: Sequence[str], max_length: int
) -> list[list[int]]:
    """``[bos] + tokens + [eos]`` per document, truncated to ``max_length``."""
    ids = tokenizer(list(docs), add_special_tokens=False)["input_ids"]
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    return [([bos, *x, eos])[:max_length] for x in ids]


def pad_batch(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token lists into ``input_ids`` and ``attention_mask`` tensors."""
    import torch

    T = max(len(r) for r in rows)
    ids = torch.full((len(rows), T), pad_id, dtype=torch.long)
    att = torch.zeros((len(rows), T), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        att[i, : len(r)] = 1
    return ids, att


def pack_windows(rows: Sequence[Sequence[int]], length: int) -> list[list[int]]:
    """Concatenate token rows into one stream and cut it into windows of ``length`` tokens
    (the last partial window is dropped)."""
    stream = [t for r in rows for t in r]
    if len(stream) < length:
        raise ConfigError(f"corpus has {len(stream)} tokens, fewer than one window of {length}")
    return [stream[i : i + length] for i in range(0, len(stream) - length + 1, length)]


def causal_loss(model, ids: torch.Tensor, att: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over non-pad targets."""
    labels = ids.masked_fill(att == 0, -100)
    return model(input_ids=ids, attention_mask=att, labels=labels).loss


def lr_at(step: int, spec: TrainSpec) -> float:
    """Linear warm-up to ``spec.lr`` then cosine decay to 10 % of it."""
    if step < spec.warmup_steps:
        return spec.lr * (step + 1) / spec.warmup_steps
    progress = (step - spec.warmup_steps) / max(1, spec.steps - spec.warmup_steps)
    return spec.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def train_lm(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    docs: Sequence[str],
    spec: TrainSpec,
    *,
    loss_fn: Callable[[Any, torch.Tensor, torch.Tensor, torch.Generator], torch.Tensor]
    | None = None,
    progress: bool = True,
    desc: str = "train",
) -> dict[str, float]:
    """Train ``model`` in place on ``docs`` with ``spec`` (AdamW, warm-up + cosine).

    ``loss_fn(model, input_ids, attention_mask, generator)`` defaults to the objective in
    ``spec`` (causal CE, or the masked-diffusion loss with the tokenizer's mask token).
    Batches are drawn with a seeded ``torch.Generator``, so a run is reproducible.
    Returns first/last smoothed training loss and wall time."""
    import torch
    from tqdm.auto import tqdm

    from llmcore.runtime import num_threads

    if loss_fn is None:
        loss_fn = objective_loss(spec.objective, tokenizer)
    rows = encode_documents(tokenizer, docs, 10**9 if spec.packing else spec.max_length)
    if not rows:
        raise ConfigError("no training documents")
    if spec.packing:
        rows = pack_windows(rows, spec.max_length)
    gen = torch.Generator().manual_seed(spec.seed)
    opt = torch.optim.AdamW(
        model.parameters(), lr=spec.lr, weight_decay=spec.weight_decay, betas=(0.9, 0.98)
    )
    dev = next(model.parameters()).device
    model.train()
    t0 = time.perf_counter()
    ema = first = None
    with num_threads(spec.threads or int(os.environ.get("LLMCORE_ZOO_THREADS", "1"))):
        bar = tqdm(range(spec.steps), desc=desc, disable=not progress, leave=False, mininterval=1.0)
        for step in bar:
            for g in opt.param_groups:
                g["lr"] = lr_at(step, spec)
            idx = torch.randint(len(rows), (spec.batch_size,), generator=gen).tolist()
            ids, att = pad_batch([rows[i] for i in idx], tokenizer.pad_token_id)
            loss = loss_fn(model, ids.to(dev), att.to(dev), gen)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            val = loss.item()
            ema = val if ema is None else 0.95 * ema + 0.05 * val
            if first is None:
                first = val
            if step % 50 == 0:
                bar.set_postfix(loss=f"{ema:.3f}")
    model.eval()
    return {
        "first_loss": float(first),
        "final_train_loss": float(ema),
        "train_seconds": time.perf_counter() - t0,
    }


def objective_loss(objective: str, tokenizer: PreTrainedTokenizerBase):
    """The loss callable for a :class:`TrainSpec` objective."""
    if objective == "causal":
        return lambda m, ids, att, gen: causal_loss(m, ids, att)
    if objective == "masked_diffusion":
        from llmcore.diffusion import masked_diffusion_loss

        if tokenizer.mask_token_id is None:
            raise ConfigError("masked_diffusion needs a tokenizer with a mask token")
        mask_id = tokenizer.mask_token_id
        return lambda m, ids, att, gen: masked_diffusion_loss(
            m, ids, mask_id, attention_mask=att, generator=gen
        )
    raise ConfigError(f"unknown objective {objective!r}")


def eval_loss(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    docs: Sequence[str],
    *,
    objective: str = "causal",
    max_length: int = 96,
    batch_size: int = 64,
    seed: int = 1234,
) -> float:
    """Mean per-token held-out loss (nats). For masked diffusion: the LLaDA loss with a fixed
    seed, averaged over 4 draws of the noise."""
    import torch

    rows = encode_documents(tokenizer, docs, max_length)
    fn = objective_loss(objective, tokenizer)
    gen = torch.Generator().manual_seed(seed)
    dev = next(model.parameters()).device
    total = weight = 0.0
    draws = 1 if objective == "causal" else 4
    with torch.no_grad():
        for _ in range(draws):
            for i in range(0, len(rows), batch_size):
                ids, att = pad_batch(rows[i : i + batch_size], tokenizer.pad_token_id)
                ids, att = ids.to(dev), att.to(dev)
                n = float(att.sum() - (len(ids) if objective == "causal" else 0))
                total += fn(model, ids, att, gen).item() * n
                weight += n
    return total / max(weight, 1.0)
