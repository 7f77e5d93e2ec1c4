"""Baselines: autoregressive decoding, standard SD, and the peer, HF assisted generation."""

from __future__ import annotations

import time
from typing import Any

import torch
from torch import nn

from via_sd.config import ViaSDConfig
from via_sd.decoding import (
    _eos_ids,
    _prompt_ids,
    autoregressive_generate,
    check_compatible,
    speculative_generate,
)
from via_sd.stats import DecodeStats, ForwardCounter, GenerationResult

__all__ = ["autoregressive_generate", "hf_assisted_generate", "speculative_generate"]


_ASSIST = (
    "num_assistant_tokens",
    "num_assistant_tokens_schedule",
    "assistant_confidence_threshold",
)


@torch.no_grad()
def hf_assisted_generate(
    target: nn.Module, drafter: nn.Module, input_ids: Any, config: ViaSDConfig | None = None
) -> GenerationResult:
    """Hugging Face assisted generation, ``target.generate(assistant_model=drafter)``, with a
    constant draft length γ and no confidence cut-off, counted by forward hooks."""
    cfg = config or ViaSDConfig()
    check_compatible(target, drafter)
    ids = _prompt_ids(input_ids)
    device = next(target.parameters()).device
    x = torch.tensor([ids], dtype=torch.long, device=device)
    eos = sorted(_eos_ids(target, cfg))
    kw: dict[str, Any] = dict(
        max_new_tokens=cfg.max_new_tokens,
        do_sample=not cfg.greedy,
        eos_token_id=eos or None,
        attention_mask=torch.ones_like(x),
    )
    if not cfg.greedy:
        kw.update(temperature=cfg.temperature, top_k=cfg.top_k or 0, top_p=cfg.top_p or 1.0)
    stats = DecodeStats(lossless=True)
    t0 = time.perf_counter()
    # HF reads the draft schedule from the assistant's generation config
    gc = drafter.generation_config
    saved = {k: getattr(gc, k, None) for k in _ASSIST}
    try:
        gc.num_assistant_tokens = cfg.gamma
        gc.num_assistant_tokens_schedule = "constant"
        gc.assistant_confidence_threshold = 0.0
        with (
            ForwardCounter(target) as ct,
            ForwardCounter(drafter) as cd,
            torch.random.fork_rng(devices=[] if device.type == "cpu" else [device]),
        ):
            torch.manual_seed(cfg.seed)
            out = target.generate(x, assistant_model=drafter, **kw)
    finally:
        for k, v in saved.items():
            setattr(gc, k, v)
    stats.wall_time_s = time.perf_counter() - t0
    seq = out[0].tolist()
    if eos:  # HF may pad after EOS
        for i in range(len(ids), len(seq)):
            if seq[i] in eos:
                seq = seq[: i + 1]
                break
    stats.tokens = len(seq) - len(ids)
    stats.target_forwards, stats.target_tokens_processed = ct.calls, ct.tokens
    stats.draft_forwards, stats.draft_tokens_processed = cd.calls, cd.tokens
    stats.forward_time_s = {"target": ct.seconds, "draft": cd.seconds}
    return GenerationResult(torch.tensor([seq], device=device), stats, len(ids))
