"""Perplexity (non-overlapping windows, exp of the mean next-token NLL), logit
differences, and token-stream loading from WikiText-2 or local files."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from respin_quant.errors import CalibrationDataError


def windows(token_ids: Tensor, seqlen: int) -> Tensor:
    """[N, seqlen] non-overlapping windows of a 1-D stream (remainder dropped); 2-D passes through."""
    if token_ids.ndim == 2:
        return token_ids
    if token_ids.ndim != 1:
        raise CalibrationDataError(
            f"token ids must be 1-D or 2-D, got shape {tuple(token_ids.shape)}"
        )
    n = token_ids.numel() // seqlen
    if n == 0:
        raise CalibrationDataError(
            f"the token stream has {token_ids.numel()} tokens, fewer than one window of {seqlen}: "
            "use more text or a shorter --seqlen"
        )
    return token_ids[: n * seqlen].reshape(n, seqlen)


def perplexity(
    model: nn.Module,
    token_ids: Tensor,
    seqlen: int = 2048,
    batch_size: int = 1,
    progress: bool = False,
) -> float:
    """exp(mean next-token NLL) over non-overlapping ``seqlen`` windows (rows if 2-D).

    The GPTQ / QuaRot / SpinQuant protocol: a 1-D stream is cut into non-overlapping windows
    (the remainder dropped) and every window is scored on its own, so its first token is
    never predicted. Scored by :func:`llmcore.metrics.perplexity` on the windows as independent
    rows, ``batch_size`` windows per forward pass, NLL pooled."""
    from llmcore.metrics import perplexity as stream_perplexity

    w = windows(token_ids, seqlen)
    step = max(1, int(batch_size))
    nll, count = 0.0, 0
    for i in tqdm(range(0, len(w), step), desc="ppl", disable=not progress, mininterval=1.0):
        res = stream_perplexity(model, w[i : i + step], max_length=w.shape[1], batch_size=step)
        nll += res.nll_sum
        count += res.n_tokens
    return math.exp(nll / count)


@torch.no_grad()
def max_abs_logit_diff(model_a: nn.Module, model_b: nn.Module, input_ids: Tensor) -> float:
    """max |logits_a - logits_b| on ``input_ids``."""
    a = model_a(input_ids).logits.double()
    b = model_b(input_ids.to(next(model_b.parameters()).device)).logits.double().to(a.device)
    return float((a - b).abs().max())


def read_text_file(path: str | Path) -> str:
    """Plain text, or JSONL with a ``text`` field per line."""
    p = Path(path)
    if not p.exists():
        raise CalibrationDataError(f"data file {p} does not exist")
    if p.suffix in (".jsonl", ".json"):
        out = []
        for ln, line in enumerate(p.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                row: Any = json.loads(line)
                out.append(row["text"])
            except (json.JSONDecodeError, KeyError, TypeError):
                raise CalibrationDataError(
                    f"{p}:{ln}: expected a JSON object with a 'text' field"
                ) from None
        return "\n\n".join(out)
    return p.read_text()


def load_text(source: str, split: str = "test") -> str:
    """'wikitext2' (hub, wikitext-2-raw-v1, joined with blank lines) or a local file."""
    if source in ("wikitext2", "wikitext", "wikitext-2-raw-v1"):
        try:
            from datasets import load_dataset

            ds = load_dataset("wikitext", "wikitext-2-raw-v1", split=split)
        except Exception as e:  # offline, missing dataset...
            raise CalibrationDataError(
                f"could not load wikitext-2-raw-v1 ({type(e).__name__}: {e}); pass a local text or "
                "JSONL file instead"
            ) from None
        return "\n\n".join(ds["text"])
    return read_text_file(source)


def token_stream(tokenizer: Any, source: str, split: str = "test") -> Tensor:
    """Tokenise a whole text source once into a 1-D LongTensor."""
    text = load_text(source, split)
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=False).input_ids[0]
    return ids.long()


def calibration_windows(
    tokenizer: Any, source: str, nsamples: int, seqlen: int, seed: int = 0
) -> Tensor:
    """``nsamples`` random ``seqlen`` windows of the train split (SpinQuant/GPTQ style)."""
    ids = token_stream(tokenizer, source, split="train")
    if ids.numel() <= seqlen:
        raise CalibrationDataError(
            f"calibration text has {ids.numel()} tokens, not more than seqlen={seqlen}: use more text"
        )
    g = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, ids.numel() - seqlen, (nsamples,), generator=g)
    return torch.stack([ids[s : s + seqlen] for s in starts.tolist()])
