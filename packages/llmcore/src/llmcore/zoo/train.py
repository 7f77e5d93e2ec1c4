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


def build_model(
    spec: ModelSpec,
    tokenizer_or_vocab_size: PreTrainedTokenizerBase | int,
    *,
    seed: int = 0,
    **config_overrides: Any,
):
    """A randomly initialised ``LlamaForCausalLM``/``Qwen2ForCausalLM`` for ``spec``, float32.

    The vocabulary (and pad/bos/eos ids) come from a tokenizer, or pass a vocabulary size for a
    model over raw token ids. ``config_overrides`` go to the transformers config last (e.g.
    ``rms_norm_eps=1e-5``, ``attention_dropout=0.1``), so a method can patch any config field
    without copying this function."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    if isinstance(tokenizer_or_vocab_size, int):
        if tokenizer_or_vocab_size <= 0:
            raise ConfigError(f"vocab size must be positive, got {tokenizer_or_vocab_size}")
        vocab: dict[str, Any] = {"vocab_size": tokenizer_or_vocab_size}
    else:
        tok = tokenizer_or_vocab_size
        vocab = dict(
            vocab_size=len(tok),
            pad_token_id=tok.pad_token_id,
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
        )
    common: dict[str, Any] = dict(
        hidden_size=spec.hidden_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads or spec.num_heads,
        intermediate_size=spec.intermediate_size,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=spec.tie_word_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": spec.rope_theta},
        **vocab,
    )
    common.update(config_overrides)
    cfg_cls, model_cls = {
        "llama": (LlamaConfig, LlamaForCausalLM),
        "qwen2": (Qwen2Config, Qwen2ForCausalLM),
    }[spec.arch]
    try:
        config = cfg_cls(**common)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid {spec.arch} config override: {exc}") from exc
    if spec.attn_implementation is not None:
        config._attn_implementation = spec.attn_implementation
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config)
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


def completion_loss(
    marker_id: int,
    *,
    objective: str = "causal",
    mask_token_id: int | None = None,
) -> Callable[[Any, torch.Tensor, torch.Tensor, torch.Generator], torch.Tensor]:
    """A ``loss_fn`` for :func:`train_lm` / ``zoo.build`` that scores only the completion: the
    tokens after the first ``marker_id`` of each row (the prompt and the marker itself are
    context, not targets). ``objective="causal"`` is next-token cross-entropy on those
    positions; ``"masked_diffusion"`` masks and scores only them (LLaDA's SFT loss, which needs
    ``mask_token_id``). A row without the marker contributes nothing."""

    if objective not in ("causal", "masked_diffusion"):
        raise ConfigError(f"objective must be 'causal' or 'masked_diffusion', got {objective!r}")
    if objective == "masked_diffusion" and mask_token_id is None:
        raise ConfigError("completion_loss(objective='masked_diffusion') needs mask_token_id")

    def prompt_part(ids: torch.Tensor) -> torch.Tensor:
        hit = (ids == marker_id).int()
        return hit.cumsum(1) - hit == 0  # up to and including the first marker; all if none

    if objective == "causal":

        def loss_fn(model, ids, att, gen):
            labels = ids.masked_fill((att == 0) | prompt_part(ids), -100)
            return model(input_ids=ids, attention_mask=att, labels=labels).loss

        return loss_fn

    from llmcore.diffusion import masked_diffusion_loss

    def diffusion_loss_fn(model, ids, att, gen):
        plen = prompt_part(ids).sum(1)  # a contiguous prefix; the whole row without a marker
        return masked_diffusion_loss(
            model, ids, mask_token_id, attention_mask=att, prompt_lengths=plen, generator=gen
        )

    return diffusion_loss_fn


def greedy_completions(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    *,
    max_new_tokens: int = 16,
    objective: str = "causal",
    batch_size: int = 32,
) -> list[str]:
    """Greedy completions of ``prompts`` (each read as ``bos + prompt``, no chat template), cut
    at eos. Causal models decode through :class:`~llmcore.generation.HFBackend`; masked-diffusion
    models with LLaDA's sampler (one block, one token per step)."""
    if objective != "masked_diffusion":
        from llmcore.generation import HFBackend, SamplingParams

        backend = HFBackend(model, tokenizer, batch_size=batch_size, progress=False)
        texts = [(tokenizer.bos_token or "") + p for p in prompts]
        outs = backend.generate(texts, SamplingParams(max_new_tokens=max_new_tokens))
        return [o[0].text.strip() for o in outs]

    import torch

    from llmcore.diffusion import llada_generate
    from llmcore.models import model_device

    dev = model_device(model)
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    out: list[str] = []
    model.eval()
    for row in tokenizer(list(prompts), add_special_tokens=False)["input_ids"]:
        ids = [bos, *row]
        gen = llada_generate(
            model,
            torch.tensor([ids], device=dev),
            tokenizer.mask_token_id,
            gen_length=max_new_tokens,
            steps=max_new_tokens,
            block_length=max_new_tokens,
        )[0, len(ids) :].tolist()
        if eos in gen:
            gen = gen[: gen.index(eos)]
        out.append(tokenizer.decode(gen, skip_special_tokens=True).strip())
    return out


def accuracy_gate(
    prompts: Sequence[str],
    answers: Sequence[str],
    *,
    lo: float = 0.0,
    hi: float = 1.0,
    max_new_tokens: int = 16,
    objective: str = "causal",
    match: Callable[[str, str], bool] | None = None,
    name: str = "gate_accuracy",
) -> Callable[[Any, Any], dict[str, float]]:
    """A ``gate(model, tokenizer)`` for ``zoo.build``/``zoo.cached`` builds: greedy accuracy on
    ``prompts`` must lie in ``[lo, hi]`` (a window: a fixture meant to be imperfect, e.g. for a
    method that should improve it, fails as loudly when too good as when too weak). Raises
    :class:`~llmcore.errors.QualityGateError` with the measured value; returns
    ``{name: accuracy}``. ``match(pred, answer)`` defaults to stripped string equality."""
    from llmcore.errors import QualityGateError

    if len(prompts) != len(answers) or not prompts:
        raise ConfigError(
            f"accuracy_gate needs as many answers as prompts (non-empty), got "
            f"{len(prompts)} prompts and {len(answers)} answers"
        )
    if not 0.0 <= lo <= hi <= 1.0:
        raise ConfigError(f"accuracy_gate needs 0 <= lo <= hi <= 1, got lo={lo}, hi={hi}")
    same = match or (lambda p, a: p.strip() == a.strip())

    def gate(model, tokenizer) -> dict[str, float]:
        preds = greedy_completions(
            model, tokenizer, prompts, max_new_tokens=max_new_tokens, objective=objective
        )
        acc = sum(bool(same(p, a)) for p, a in zip(preds, answers, strict=True)) / len(answers)
        if not lo <= acc <= hi:
            raise QualityGateError(
                f"{name}={acc:.4f} on {len(answers)} prompts is outside the gate window "
                f"[{lo}, {hi}] (e.g. prompt {prompts[0]!r} -> {preds[0]!r}, expected "
                f"{answers[0]!r}); change the recipe (steps, lr, task difficulty), nothing "
                "was cached"
            )
        return {name: acc}

    return gate


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
