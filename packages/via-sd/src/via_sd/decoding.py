"""Decoders: autoregressive, standard speculative decoding and VIA-SD.

All three share one loop. Standard SD is VIA-SD with only tier C; AR is the target alone.
Every model keeps its own KV cache; after each block the caches are cropped back to the
committed sequence (rollback). Batch size is 1, as in HF assisted generation.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from via_sd._runner import CachedRunner
from via_sd.config import ViaSDConfig
from via_sd.drafters import Drafter, as_drafter
from via_sd.errors import UnsupportedModelError, ViaSDConfigError, ViaSDInputError, ViaSDTypeError
from via_sd.sampling import Sampler, route, speculative_step
from via_sd.slim import FullModel, SlimVerifier, check_decoder_only
from via_sd.stats import DecodeStats, GenerationResult

BlockCallback = Callable[[dict[str, Any]], None]


def _prompt_ids(input_ids: Any) -> list[int]:
    if isinstance(input_ids, torch.Tensor):
        if input_ids.dim() == 1:
            input_ids = input_ids.unsqueeze(0)
        if input_ids.dim() != 2:
            raise ViaSDInputError(f"input_ids must be [1, T], got shape {tuple(input_ids.shape)}")
        if input_ids.shape[0] != 1:
            raise UnsupportedModelError(
                f"batch size {input_ids.shape[0]} > 1 is not supported (as in HF assisted "
                "decoding); loop over prompts"
            )
        ids = input_ids[0].tolist()
    elif isinstance(input_ids, Sequence) and not isinstance(input_ids, str):
        ids = list(input_ids)
        if ids and isinstance(ids[0], Sequence):
            if len(ids) > 1:
                raise UnsupportedModelError("batch size > 1 is not supported; loop over prompts")
            ids = list(ids[0])
    else:
        raise ViaSDTypeError(
            f"input_ids must be a LongTensor [1, T] or a list of ints, got {type(input_ids).__name__}"
        )
    if not ids:
        raise ViaSDInputError("the prompt is empty: pass at least one token (e.g. BOS)")
    return [int(x) for x in ids]


def _device_dtype(model: nn.Module) -> tuple[torch.device, torch.dtype]:
    p = next(model.parameters())
    return p.device, p.dtype


def _eos_ids(model: nn.Module, config: ViaSDConfig) -> set[int]:
    if config.eos_token_id is not None:
        return {int(config.eos_token_id)}
    eos = getattr(getattr(model, "config", None), "eos_token_id", None)
    if eos is None:
        return set()
    return {int(e) for e in eos} if isinstance(eos, list | tuple) else {int(eos)}


def _check_target(target: Any) -> None:
    if not isinstance(target, nn.Module):
        raise ViaSDTypeError(f"target must be a causal LM nn.Module, got {type(target).__name__}")
    check_decoder_only(target)
    try:
        from transformers import DynamicCache
    except ImportError:  # pragma: no cover
        raise UnsupportedModelError("transformers is required") from None
    if not hasattr(DynamicCache, "crop"):  # pragma: no cover
        raise UnsupportedModelError("this transformers version's DynamicCache has no crop()")


def check_compatible(target: nn.Module, draft_model: nn.Module | None) -> None:
    """Same vocabulary, special tokens, device and dtype (no silent casting)."""
    if draft_model is None:
        return
    tc, dc = target.config, draft_model.config
    for name in ("eos_token_id", "bos_token_id", "pad_token_id"):
        a, b = getattr(tc, name, None), getattr(dc, name, None)
        if a is not None and b is not None and a != b:
            raise ViaSDInputError(
                f"drafter and target disagree on {name} ({b} vs {a}): they need the same "
                "tokenizer; use a drafter from the target's model family"
            )
    va, vb = getattr(tc, "vocab_size", None), getattr(dc, "vocab_size", None)
    if va is not None and vb is not None and va != vb:
        raise ViaSDInputError(
            f"drafter vocab_size {vb} differs from the target's {va}: they need the same "
            "tokenizer; use a drafter from the target's model family"
        )
    (d1, t1), (d2, t2) = _device_dtype(target), _device_dtype(draft_model)
    if d1 != d2 or t1 != t2:
        raise ViaSDInputError(
            f"target is on {d1}/{t1} but the drafter on {d2}/{t2}; move both to the same device "
            "and dtype (no silent casting)"
        )


def _finish(
    seq: list[int], n0: int, stats: DecodeStats, t0: float, target: nn.Module, cfg: ViaSDConfig
) -> GenerationResult:
    stats.tokens = len(seq) - n0
    stats.wall_time_s = time.perf_counter() - t0
    device = _device_dtype(target)[0]
    out = torch.tensor([seq], dtype=torch.long, device=device)
    if cfg.measure_divergence and stats.tokens:
        # one uncharged q pass over prompt + output: argmax q at every emitted position
        with torch.no_grad():
            logits = target(input_ids=out, use_cache=False).logits[0, n0 - 1 : -1]
        ref = logits.argmax(-1).tolist()
        stats.divergence_rate = sum(a != b for a, b in zip(ref, seq[n0:], strict=True)) / len(ref)
    return GenerationResult(out, stats, n0)


def autoregressive_generate(
    target: nn.Module, input_ids: Any, config: ViaSDConfig | None = None
) -> GenerationResult:
    """Plain decoding with q: one target forward per emitted token (the prefill yields the
    first token)."""
    cfg = config or ViaSDConfig()
    _check_target(target)
    seq = _prompt_ids(input_ids)
    n0, t0 = len(seq), time.perf_counter()
    stats = DecodeStats(lossless=True)
    device, _ = _device_dtype(target)
    tq = CachedRunner(FullModel(target), "target", stats, device)
    sampler = Sampler(cfg)
    eos = _eos_ids(target, cfg)
    while len(seq) - n0 < cfg.max_new_tokens:
        t = sampler.pick(tq.logits_from(seq, len(seq) - 1)[-1])
        seq.append(t)
        if t in eos:
            break
    stats.target_forwards, stats.target_tokens_processed = tq.calls, tq.tokens
    return _finish(seq, n0, stats, t0, target, cfg)


def speculative_generate(
    target: nn.Module,
    drafter: Drafter | nn.Module,
    input_ids: Any,
    config: ViaSDConfig | None = None,
    *,
    on_block: BlockCallback | None = None,
) -> GenerationResult:
    """Standard draft-then-verify SD (Leviathan et al. 2023; Chen et al. 2023), lossless:
    greedy output equals greedy q; sampled output is distributed as q."""
    return _speculative(target, drafter, None, input_ids, config or ViaSDConfig(), on_block)


def via_sd_generate(
    target: nn.Module,
    drafter: Drafter | nn.Module,
    slim: SlimVerifier | Sequence[int] | None,
    input_ids: Any,
    config: ViaSDConfig | None = None,
    *,
    on_block: BlockCallback | None = None,
) -> GenerationResult:
    """VIA-SD: each draft is accepted (tier A), regenerated by the slim verifier
    q' (tier B) or verified by q (tier C) by its confidence ratio r_j = q'(d_j)/max q'.
    Lossy in general (see ``DecodeStats.lossless``). ``slim`` may be a list of skipped layers;
    ``None`` uses the evenly spaced mask at skip_ratio 0.45."""
    if not isinstance(slim, SlimVerifier):
        _check_target(target)
        slim = SlimVerifier(target, skip_layers=None if slim is None else list(slim))
    elif slim.model is not target:
        raise ViaSDInputError("the slim verifier must be built from the same target model")
    return _speculative(target, drafter, slim, input_ids, config or ViaSDConfig(), on_block)


def _via_lossless(slim: SlimVerifier, cfg: ViaSDConfig) -> bool:
    if cfg.tau_escalate > 1.0:  # every r_j <= 1 escalates: exactly standard SD
        return True
    empty = not (slim.skip_layers or slim.attn_skip or slim.mlp_skip)
    return cfg.greedy and empty and cfg.tau_accept >= 1.0


def _tiers(
    sl: torch.Tensor, sp: torch.Tensor | None, drafts: list[int], cfg: ViaSDConfig
) -> list[str]:
    """Tier of every draft position from q''s logits ``sl`` (greedy: r_j = q'(d_j)/max q' from
    the raw logits) or its processed distribution ``sp`` (sampling)."""
    if not drafts:
        return []
    k = len(drafts)
    idx = torch.tensor(drafts, dtype=torch.long, device=sl.device).unsqueeze(-1)
    if sp is None:
        x = sl[:k]
        r = torch.exp(x.gather(-1, idx).squeeze(-1) - x.max(-1).values)
    else:
        x = sp[:k]
        r = x.gather(-1, idx).squeeze(-1) / x.max(-1).values
    return [route(v, cfg.tau_accept, cfg.tau_escalate) for v in r.tolist()]


def _speculative(
    target: nn.Module,
    drafter_in: Drafter | nn.Module,
    slim: SlimVerifier | None,
    input_ids: Any,
    cfg: ViaSDConfig,
    on_block: BlockCallback | None,
) -> GenerationResult:
    _check_target(target)
    drafter = as_drafter(drafter_in)
    if drafter.model is not None and drafter.model is not target:
        check_compatible(target, drafter.model)
    if not cfg.greedy and not drafter.has_probs:
        raise ViaSDConfigError(
            f"the {drafter.name} drafter has no draft probabilities, so it supports greedy "
            "verification only; set temperature=0 or use a model drafter"
        )
    seq = _prompt_ids(input_ids)
    n0, t0 = len(seq), time.perf_counter()
    device, _ = _device_dtype(target)
    stats = DecodeStats()
    stats.lossless = True if slim is None else _via_lossless(slim, cfg)
    sampler = Sampler(cfg)
    drafter.start(stats, sampler)
    tq = CachedRunner(FullModel(target), "target", stats, device)
    ts = CachedRunner(slim, "slim", stats, device) if slim is not None else None
    eos = _eos_ids(target, cfg)
    greedy = cfg.greedy

    done = False
    while not done and len(seq) - n0 < cfg.max_new_tokens:
        k = min(cfg.gamma, cfg.max_new_tokens - (len(seq) - n0))
        drafts, dprobs = drafter.propose(seq, k)
        drafts = list(drafts)[:k]
        for i, d in enumerate(drafts):  # a draft containing EOS is cut there
            if d in eos:
                drafts = drafts[: i + 1]
                break
        stats.block_drafts.append(len(drafts))
        n = len(seq)
        block = seq + drafts
        sl = ts.logits_from(block, n - 1) if ts is not None else None
        sp = sampler.probs(sl) if (sl is not None and not greedy) else None
        # Route every draft and take q''s argmaxes in one pass per block: one host sync per
        # model call instead of one per draft position (matters on GPU).
        tiers = ["c"] * len(drafts) if sl is None else _tiers(sl, sp, drafts, cfg)
        s_arg = sl.argmax(-1).tolist() if (sl is not None and greedy) else None
        tl: torch.Tensor | None = None
        tp: torch.Tensor | None = None
        t_arg: list[int] | None = None
        out: list[int] = []
        stopped = False
        for j, (d, tier) in enumerate(zip(drafts, tiers, strict=True)):
            stats.drafted += 1
            if tier == "c" and tl is None:
                tl = tq.logits_from(block, n - 1)
                tp = None if greedy else sampler.probs(tl)
                t_arg = tl.argmax(-1).tolist() if greedy else None
            if tier == "a":
                t, ok = d, True
            elif greedy:
                t = (s_arg if tier == "b" else t_arg)[j]
                ok = t == d
            else:
                t, ok = speculative_step(d, dprobs[j], (sp if tier == "b" else tp)[j], sampler)
            setattr(stats, f"tier_{tier}", getattr(stats, f"tier_{tier}") + 1)
            out.append(t)
            if not ok:
                stats.rejections += 1
                if tier == "b":
                    stats.rejections_b += 1
                else:
                    stats.rejections_c += 1
                stopped = True
            if stopped or out[-1] in eos:
                break
        if not stopped and (not out or out[-1] not in eos) and (cfg.bonus_token or not drafts):
            j = len(drafts)
            if tl is None and (sl is None):
                tl = tq.logits_from(block, n - 1)
                tp = None if greedy else sampler.probs(tl)
            if tl is not None:
                out.append(int(tl[j].argmax()) if greedy else sampler.sample(tp[j]))
            else:
                out.append(int(sl[j].argmax()) if greedy else sampler.sample(sp[j]))
        room = cfg.max_new_tokens - (len(seq) - n0)
        out = out[:room]
        for t in out:
            seq.append(t)
            if t in eos:
                done = True
                break
        stats.blocks += 1
        for runner in (tq, ts, getattr(drafter, "runner", None)):
            if runner is not None:
                runner.rollback(seq)
        if on_block is not None:
            on_block(
                {
                    "committed": len(seq),
                    "emitted": len(out),
                    "target_ran": tl is not None,
                    "target_cache": tq.cache_length,
                    "slim_cache": ts.cache_length if ts is not None else None,
                    "slim_ids_prefix": ts is None or ts.ids == seq[: len(ts.ids)],
                }
            )
    stats.target_forwards, stats.target_tokens_processed = tq.calls, tq.tokens
    if ts is not None:
        stats.slim_forwards, stats.slim_tokens_processed = ts.calls, ts.tokens
    stats.draft_forwards = drafter.forwards
    stats.draft_tokens_processed = drafter.tokens_processed
    return _finish(seq, n0, stats, t0, target, cfg)
