"""A model with its own KV cache that remembers which token ids the cache holds."""

from __future__ import annotations

import time
from typing import Any

import torch

from via_sd.errors import NonFiniteLogitsError
from via_sd.stats import DecodeStats


def common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def crop_cache(cache: Any, n: int) -> None:
    """Crop every initialised layer of a ``DynamicCache`` to its first ``n`` positions.

    Layers a slim verifier skips hold nothing and are left alone (``DynamicCache.crop`` would
    fail on them). transformers >= 5.x crops by a negative count; older versions took the
    final length."""
    layers = getattr(cache, "layers", None)
    if layers is None:  # pragma: no cover - pre-5.x caches
        cache.crop(n)
        return
    for layer in layers:
        if getattr(layer, "keys", None) is None or not getattr(layer, "is_initialized", True):
            continue
        cur = int(layer.get_seq_length())
        if cur > n:
            try:
                layer.crop(n - cur)
            except ValueError:  # pragma: no cover - legacy absolute-length API
                layer.crop(n)


class CachedRunner:
    """Runs ``lm`` (anything with ``forward(ids, cache)`` and ``new_cache()``) incrementally.

    ``logits_from(seq, start)`` returns logits for positions ``start..len(seq)-1`` (row i
    predicts token ``start+i+1``), re-using the longest cached prefix of ``seq`` and cropping
    the rest (the rollback after every block). Counts calls and tokens into ``stats``.
    """

    def __init__(self, lm: Any, role: str, stats: DecodeStats, device: torch.device) -> None:
        self.lm = lm
        self.role = role
        self.stats = stats
        self.device = device
        self.cache = lm.new_cache()
        self.ids: list[int] = []
        self.calls = 0
        self.tokens = 0

    def crop(self, n: int) -> None:
        if n >= len(self.ids):
            return
        if n == 0:
            self.cache = self.lm.new_cache()
        else:
            crop_cache(self.cache, n)
        self.ids = self.ids[:n]

    def rollback(self, committed: list[int]) -> None:
        self.crop(common_prefix(self.ids, committed))

    @property
    def cache_length(self) -> int:
        return int(self.cache.get_seq_length()) if self.ids else 0

    @torch.no_grad()
    def logits_from(self, seq: list[int], start: int) -> torch.Tensor:
        n = min(common_prefix(self.ids, seq), start)
        self.crop(n)
        new = torch.tensor([seq[n:]], dtype=torch.long, device=self.device)
        t0 = time.perf_counter()
        logits = self.lm.forward(new, self.cache)[0]
        self.stats.add_time(self.role, time.perf_counter() - t0)
        self.calls += 1
        self.tokens += new.shape[1]
        self.ids = list(seq)
        out = logits[start - n :].float()
        if not torch.isfinite(out).all():
            bad = int((~torch.isfinite(out)).any(-1).nonzero()[0, 0]) + start
            raise NonFiniteLogitsError(
                f"the {self.role} model produced NaN/inf logits at position {bad}; check its "
                "weights and dtype (fp16 overflow is a common cause, try bf16 or fp32)"
            )
        return out
