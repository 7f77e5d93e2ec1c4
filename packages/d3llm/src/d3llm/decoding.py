"""Decoders for masked diffusion LMs, all returning one :class:`DecodeResult`.

* :func:`decode_vanilla`: LLaDA's block-wise low-confidence remasking with a fixed number of
  steps (paper Sec. 2, LLaDA ``generate``); with ``steps = gen_length`` one token per forward.
* :func:`decode_threshold`: single-block threshold decoding, Fast-dLLM's confidence rule or
  dParallel/d3LLM's entropy rule (commit every masked position of the current block whose
  entropy is at most the threshold, and always the lowest-entropy one).
* :func:`decode_multiblock`: d3LLM's entropy-based multi-block decoding (Sec. 3.2) with block
  addition/activation thresholds, early stop at EOS and, optionally, the delayed KV cache with
  periodic refresh (Sec. 3.3; reconstructed cache semantics, see the function).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from d3llm.errors import D3LLMConfigError, NFECapError

if TYPE_CHECKING:
    import torch

    from d3llm.model import MaskedDiffusionLM


@dataclass
class DecodeResult:
    """Outcome of decoding a batch of prompts.

    ``tokens[b]`` counts generated tokens before the first EOS (EOS and padding excluded, the
    official TPF count); ``tpf = sum(tokens) / sum(nfe)``. ``tpf_positions`` counts every
    committed position (EOS padding included) per forward. ``tpf_content`` counts the content
    tokens up to and including the first EOS over the forwards needed to commit them.
    ``commit_step[b][i]`` is the forward (1-based) at which generated position ``i`` was
    committed. ``tokens_processed`` sums the positions fed to the model over all forwards."""

    sequences: torch.Tensor
    prompt_length: int
    nfe: list[int]
    tokens: list[int]
    tpf: float
    tpf_positions: float
    tpf_content: float
    tokens_processed: int
    commit_step: list[list[int]]
    history: list[torch.Tensor] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def generated(self) -> torch.Tensor:
        """The generated part ``[B, L]``."""
        return self.sequences[:, self.prompt_length :]

    @property
    def total_nfe(self) -> int:
        return int(sum(self.nfe))


def _as_prompt(m: MaskedDiffusionLM, prompt_ids: Any) -> torch.Tensor:
    import torch

    x = torch.as_tensor(prompt_ids, dtype=torch.long)
    if x.dim() == 1:
        x = x[None]
    if x.dim() != 2 or x.shape[1] == 0:
        raise D3LLMConfigError(
            f"prompt_ids must be a non-empty [P] or [B, P] token list, got shape {tuple(x.shape)}"
        )
    if (x == m.mask_token_id).any():
        raise D3LLMConfigError(
            f"the prompt already contains the mask id {m.mask_token_id}; remove it or use a "
            "different mask token"
        )
    return x.to(m.device)


def _positive(**kw: int) -> None:
    for k, v in kw.items():
        if int(v) <= 0:
            raise D3LLMConfigError(f"{k} must be a positive integer, got {v}")


def _check_temperature(temperature: float) -> None:
    if temperature < 0:
        raise D3LLMConfigError(f"temperature must be >= 0, got {temperature}")


def _argmax(logits: torch.Tensor, temperature: float, generator: Any) -> torch.Tensor:
    """Greedy or Gumbel-max (float64, LLaDA's form) token choice."""
    import torch

    if temperature == 0:
        return logits.argmax(-1)
    gdev = generator.device if generator is not None else logits.device
    u = torch.rand(logits.shape, dtype=torch.float64, device=gdev, generator=generator)
    gumbel = (-torch.log(u.to(logits.device).clamp_min(1e-20))) ** temperature
    return (logits.double().exp() / gumbel).argmax(-1)


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """Predictive entropy ``-sum p log(p + 1e-12)`` in float64 (nats)."""
    import torch

    p = torch.softmax(logits.double(), -1)
    return -(p * torch.log(p + 1e-12)).sum(-1)


def _finish(
    x: torch.Tensor,
    P: int,
    nfe: list[int],
    commit: torch.Tensor,
    processed: int,
    eos: int | None,
    history: list | None,
    extra: dict | None = None,
) -> DecodeResult:
    gen = x[:, P:].tolist()
    cs = commit.tolist()
    tokens, content_tok, content_nfe = [], 0, 0
    for b, row in enumerate(gen):
        cut = row.index(eos) if eos is not None and eos in row else len(row)
        tokens.append(cut)
        upto = min(cut + 1, len(row))
        content_tok += upto
        content_nfe += max(cs[b][:upto]) if upto else 0
    tot_nfe = max(1, sum(nfe))
    positions = sum(len(r) for r in gen)
    return DecodeResult(
        sequences=x,
        prompt_length=P,
        nfe=nfe,
        tokens=tokens,
        tpf=sum(tokens) / tot_nfe,
        tpf_positions=positions / tot_nfe,
        tpf_content=content_tok / max(1, content_nfe),
        tokens_processed=processed,
        commit_step=cs,
        history=history,
        extra=extra or {},
    )


def vanilla_schedule(n_masked: int, steps: int) -> list[int]:
    """Tokens to commit per step in one block: ``n // steps`` each, the first ``n % steps``
    steps one more (LLaDA's ``get_num_transfer_tokens``)."""
    base, rem = divmod(int(n_masked), int(steps))
    return [base + (1 if i < rem else 0) for i in range(int(steps))]


def decode_vanilla(
    m: MaskedDiffusionLM,
    prompt_ids: Any,
    gen_length: int = 256,
    steps: int = 256,
    block_length: int = 32,
    temperature: float = 0.0,
    remasking: Literal["low_confidence", "random"] = "low_confidence",
    *,
    generator: torch.Generator | None = None,
    record_history: bool = False,
) -> DecodeResult:
    """LLaDA's sampler: per block, commit the scheduled number of most confident masks per
    forward (``temperature > 0``: Gumbel-max in float64). Batched over equal-length prompts."""
    import torch

    _positive(gen_length=gen_length, steps=steps, block_length=block_length)
    _check_temperature(temperature)
    if gen_length % block_length:
        raise D3LLMConfigError(
            f"gen_length={gen_length} must be a multiple of block_length={block_length}"
        )
    n_blocks = gen_length // block_length
    if steps % n_blocks:
        raise D3LLMConfigError(
            f"steps={steps} must be a multiple of the number of blocks ({n_blocks} = "
            f"gen_length / block_length)"
        )
    if remasking not in ("low_confidence", "random"):
        raise D3LLMConfigError(f"remasking must be 'low_confidence' or 'random', got {remasking!r}")
    prompt = _as_prompt(m, prompt_ids)
    B, P = prompt.shape
    dev = prompt.device
    mid = m.mask_token_id
    x = torch.full((B, P + gen_length), mid, dtype=torch.long, device=dev)
    x[:, :P] = prompt
    commit = torch.zeros(B, gen_length, dtype=torch.long)
    spb = steps // n_blocks
    nfe, history = 0, ([] if record_history else None)
    with torch.no_grad():
        for blk in range(n_blocks):
            lo, hi = P + blk * block_length, P + (blk + 1) * block_length
            n_masked = (x[:, lo:hi] == mid).sum(1).tolist()
            sched = [vanilla_schedule(n, spb) for n in n_masked]
            for step in range(spb):
                is_mask = x == mid
                logits, _ = m.forward(x)
                nfe += 1
                x0 = _argmax(logits, temperature, generator)
                if remasking == "low_confidence":
                    conf = torch.softmax(logits.double(), -1).gather(-1, x0[..., None])[..., 0]
                else:
                    gdev = generator.device if generator is not None else dev
                    conf = torch.rand(
                        x.shape, dtype=torch.float64, device=gdev, generator=generator
                    ).to(dev)
                conf[:, hi:] = -torch.inf
                x0 = torch.where(is_mask, x0, x)
                conf = torch.where(is_mask, conf, torch.full_like(conf, -torch.inf))
                for b in range(B):
                    k = sched[b][step]
                    if k > 0:
                        idx = torch.topk(conf[b], k).indices
                        x[b, idx] = x0[b, idx]
                        commit[b, (idx - P).cpu()] = nfe
                if history is not None:
                    history.append(x.detach().cpu().clone())
    T = P + gen_length
    return _finish(x, P, [nfe] * B, commit, nfe * T * B, m.eos_token_id, history)


def _check_entropy_threshold(threshold: float) -> None:
    if threshold < 0:
        raise D3LLMConfigError(f"the entropy threshold must be >= 0 (nats), got {threshold}")


def decode_threshold(
    m: MaskedDiffusionLM,
    prompt_ids: Any,
    gen_length: int = 256,
    block_length: int = 32,
    mode: Literal["entropy", "confidence"] = "entropy",
    threshold: float = 0.5,
    *,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
    max_nfe: int = 10_000,
    record_history: bool = False,
) -> DecodeResult:
    """Single-block threshold decoding, blocks left to right, each prompt on its own.

    ``mode="confidence"`` (Fast-dLLM): commit every masked position of the current block with
    ``p(x_hat) >= threshold`` (0 < threshold <= 1). ``mode="entropy"`` (dParallel/d3LLM): commit
    those with entropy ``<= threshold``. Both always commit the best position."""
    import torch

    _positive(gen_length=gen_length, block_length=block_length)
    _check_temperature(temperature)
    if gen_length % block_length:
        raise D3LLMConfigError(
            f"gen_length={gen_length} must be a multiple of block_length={block_length}"
        )
    if mode == "confidence":
        if not 0.0 < threshold <= 1.0:
            raise D3LLMConfigError(f"the confidence threshold must be in (0, 1], got {threshold}")
    elif mode == "entropy":
        _check_entropy_threshold(threshold)
    else:
        raise D3LLMConfigError(f"mode must be 'entropy' or 'confidence', got {mode!r}")
    prompt = _as_prompt(m, prompt_ids)
    B, P = prompt.shape
    mid = m.mask_token_id
    rows, nfes, commits, hist = [], [], [], ([] if record_history else None)
    processed = 0
    with torch.no_grad():
        for b in range(B):
            x = torch.full((1, P + gen_length), mid, dtype=torch.long, device=prompt.device)
            x[0, :P] = prompt[b]
            commit = torch.zeros(gen_length, dtype=torch.long)
            nfe = 0
            for blk in range(gen_length // block_length):
                lo, hi = P + blk * block_length, P + (blk + 1) * block_length
                while bool((x[0, lo:hi] == mid).any()):
                    if nfe >= max_nfe:
                        partial = _finish(x, P, [nfe], commit[None], processed, None, None)
                        raise NFECapError(f"decode_threshold hit max_nfe={max_nfe}", partial)
                    logits, _ = m.forward(x)
                    nfe += 1
                    processed += x.shape[1]
                    x0 = _argmax(logits[0], temperature, generator)
                    masked = torch.zeros_like(x[0], dtype=torch.bool)
                    masked[lo:hi] = x[0, lo:hi] == mid
                    if mode == "confidence":
                        probs = torch.softmax(logits[0].double(), -1)
                        score = probs.gather(-1, x0[:, None])[:, 0]
                        ok = score >= threshold
                    else:
                        score = -entropy(logits[0])
                        ok = -score <= threshold
                    score = score.masked_fill(~masked, -torch.inf)
                    take = masked & ok
                    take[int(score.argmax())] = True
                    x[0, take] = x0[take]
                    commit[(take.nonzero()[:, 0] - P).cpu()] = nfe
                    if hist is not None:
                        hist.append(x.detach().cpu().clone())
            rows.append(x)
            nfes.append(nfe)
            commits.append(commit)
    return _finish(torch.cat(rows), P, nfes, torch.stack(commits), processed, m.eos_token_id, hist)


def _crop(cache: Any, length: int) -> None:
    """Keep the first ``length`` positions of a ``DynamicCache`` (transformers 5 ``crop`` takes
    the number of positions to remove as a negative count)."""
    extra = int(cache.get_seq_length()) - length
    if extra > 0:
        cache.crop(-extra)


@dataclass
class _Block:
    start: int
    end: int
    mask_count: int
    activated: bool
    done_at: int | None = None  # NFE at which the block became fully decoded

    @property
    def total(self) -> int:
        return self.end - self.start

    @property
    def progress(self) -> float:
        return 1.0 - self.mask_count / self.total if self.total else 1.0


def decode_multiblock(
    m: MaskedDiffusionLM,
    prompt_ids: Any,
    max_new_tokens: int = 256,
    block_size: int = 32,
    threshold: float = 0.5,
    block_add_threshold: float = 0.1,
    decoded_token_threshold: float = 0.95,
    variant: Literal["llada", "dream"] = "llada",
    use_kv_cache: bool = False,
    cache_delay_iter: int = 2,
    refresh_interval: int = 3,
    early_stop: bool = True,
    temperature: float = 0.0,
    record_history: bool = False,
    *,
    generator: torch.Generator | None = None,
    max_nfe: int = 10_000,
) -> DecodeResult:
    """Entropy-based multi-block decoding (batch 1).

    Blocks of ``block_size`` after the prompt are created left to right: the next block is
    appended once the last one's progress (share of committed positions) reaches
    ``block_add_threshold`` and is *activated* once its predecessor's progress reaches
    ``decoded_token_threshold`` (until then it is semi-activated). Each forward commits, over
    the masked positions of all created blocks, the lowest-entropy one (``variant="llada"``)
    and every one with entropy ``<= threshold``; the first activated block with masks left is
    guaranteed one commit. With ``early_stop`` a committed EOS fills every later position with
    EOS. With both block thresholds at 1.0 and no early stop this is single-block entropy
    decoding.

    KV cache (``use_kv_cache``; reconstructed semantics): a fully decoded block becomes
    cacheable ``cache_delay_iter`` forwards later, and cacheable blocks form a contiguous
    prefix ``[0, C)``. A step refreshes (one full forward, whose logits it decodes from, then
    the cache is cropped to ``C``) when the cache is empty, ``nfe % refresh_interval == 0`` or a
    block has newly become cacheable; otherwise only ``x[C:]`` is forwarded against the cached
    prefix. Cached prefix states are approximate, as in Fast-dLLM's prefix cache. With
    ``logits_shift="right"`` a partial forward has no logit for position ``C - 1``, so the first
    uncached position uses its own logit (committed positions are never before ``C``)."""
    import torch

    _positive(max_new_tokens=max_new_tokens, block_size=block_size)
    _check_temperature(temperature)
    _check_entropy_threshold(threshold)
    if max_new_tokens % block_size:
        raise D3LLMConfigError(
            f"max_new_tokens={max_new_tokens} must be a multiple of block_size={block_size}"
        )
    for name, v in (
        ("block_add_threshold", block_add_threshold),
        ("decoded_token_threshold", decoded_token_threshold),
    ):
        if not 0.0 <= v <= 1.0:
            raise D3LLMConfigError(f"{name} must be in [0, 1], got {v}")
    if variant not in ("llada", "dream"):
        raise D3LLMConfigError(f"variant must be 'llada' or 'dream', got {variant!r}")
    if cache_delay_iter < 0:
        raise D3LLMConfigError(f"cache_delay_iter must be >= 0, got {cache_delay_iter}")
    if refresh_interval < 1:
        raise D3LLMConfigError(f"refresh_interval must be >= 1, got {refresh_interval}")
    prompt = _as_prompt(m, prompt_ids)
    if prompt.shape[0] != 1:
        raise NotImplementedError(
            f"decode_multiblock decodes one prompt at a time (got a batch of {prompt.shape[0]}); "
            "loop over the prompts"
        )
    P = prompt.shape[1]
    L = max_new_tokens
    mid, eos = m.mask_token_id, m.eos_token_id
    x = torch.full((1, P + L), mid, dtype=torch.long, device=prompt.device)
    x[0, :P] = prompt[0]
    n_total = L // block_size
    blocks = [_Block(0, P, 0, True, done_at=-(10**9)), _Block(P, P + block_size, block_size, True)]
    commit = torch.zeros(L, dtype=torch.long)
    nfe, processed, refreshes = 0, 0, 0
    history = [] if record_history else None
    cache, C = None, 0
    eos_seen = False

    def created() -> int:
        return len(blocks) - 1

    with torch.no_grad():
        while True:
            n_masks = int((x[0, P:] == mid).sum())
            if n_masks == 0 and created() == n_total:
                break
            if nfe >= max_nfe:
                partial = _finish(x, P, [nfe], commit[None], processed, eos, history)
                raise NFECapError(
                    f"decode_multiblock hit max_nfe={max_nfe} with {n_masks} masks left", partial
                )
            # activation, then block addition
            for i in range(2, len(blocks)):
                if not blocks[i].activated and blocks[i - 1].progress >= decoded_token_threshold:
                    blocks[i].activated = True
            if created() < n_total and not eos_seen:
                last = blocks[-1]
                if last.progress >= block_add_threshold or last.mask_count == 0:
                    s = last.end
                    blocks.append(
                        _Block(
                            s,
                            s + block_size,
                            block_size,
                            last.progress >= decoded_token_threshold,
                        )
                    )
            active_end = blocks[-1].end
            # forward (full, or the suffix against the cached prefix)
            if use_kv_cache:
                cacheable = 0
                for blk in blocks:
                    if blk.done_at is not None and nfe - blk.done_at >= cache_delay_iter:
                        cacheable = blk.end
                    else:
                        break
                if cache is None or nfe % refresh_interval == 0 or cacheable > C:
                    logits, cache = m.forward(x, use_cache=True)
                    processed += x.shape[1]
                    refreshes += 1
                    C = cacheable
                    _crop(cache, C)
                else:
                    part, _ = m.forward(x[:, C:], past_key_values=cache, use_cache=True)
                    _crop(cache, C)
                    processed += x.shape[1] - C
                    logits = torch.zeros(1, x.shape[1], part.shape[-1], dtype=part.dtype)
                    logits = logits.to(part.device)
                    logits[:, C:] = part
            else:
                logits, _ = m.forward(x)
                processed += x.shape[1]
            nfe += 1
            x0 = _argmax(logits[0], temperature, generator)
            H = entropy(logits[0])
            cand = torch.zeros(x.shape[1], dtype=torch.bool, device=x.device)
            cand[P:active_end] = x[0, P:active_end] == mid
            take = cand & (threshold >= H)
            Hc = H.masked_fill(~cand, torch.inf)
            if variant == "llada" and bool(cand.any()):
                take[int(Hc.argmin())] = True
            for blk in blocks[1:]:
                if blk.activated and blk.mask_count > 0:
                    if not bool(take[blk.start : blk.end].any()):
                        j = blk.start + int(Hc[blk.start : blk.end].argmin())
                        take[j] = True
                    break
            x[0, take] = x0[take]
            commit[(take.nonzero()[:, 0] - P).cpu()] = nfe
            for blk in blocks[1:]:
                blk.mask_count = int((x[0, blk.start : blk.end] == mid).sum())
                if blk.mask_count == 0 and blk.done_at is None:
                    blk.done_at = nfe
            # early stop at a committed EOS
            if early_stop and eos is not None:
                gen = x[0, P:]
                hits = (gen == eos).nonzero()
                if len(hits):
                    eos_seen = True
                    first = P + int(hits[0, 0])
                    fill = x[0, first + 1 :] == mid
                    commit[(fill.nonzero()[:, 0] + first + 1 - P).cpu()] = nfe
                    x[0, first + 1 :] = eos
                    while created() < n_total:
                        s = blocks[-1].end
                        blocks.append(_Block(s, s + block_size, 0, True))
                    for blk in blocks[1:]:
                        blk.mask_count = int((x[0, blk.start : blk.end] == mid).sum())
                        if blk.mask_count == 0 and blk.done_at is None:
                            blk.done_at = nfe
            if history is not None:
                history.append(x.detach().cpu().clone())
    return _finish(
        x,
        P,
        [nfe],
        commit[None],
        processed,
        eos,
        history,
        extra={"refreshes": refreshes},
    )
