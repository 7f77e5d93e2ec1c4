"""Decode statistics and a forward-hook counter."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn


@dataclass
class DecodeStats:
    """Counters of one decoding run.

    ``drafted`` counts the draft positions that were routed (those after a block-ending
    rejection are discarded unrouted), so ``tier_a + tier_b + tier_c == drafted`` and
    ``rejection_rate = rejections / drafted``
    (``rejections = rejections_b + rejections_c``). A tier-B regeneration that emits a token other
    than the draft counts as a rejection. ``lossless`` is True only when the output provably
    follows the target's (greedy: equals greedy q; sampling: is distributed as q).
    ``block_drafts`` holds the number of draft positions each block offered (γ, or fewer at
    an EOS or the token budget), which the block model of ``via_sd.theory`` needs.
    """

    tokens: int = 0
    target_forwards: int = 0
    target_tokens_processed: int = 0
    slim_forwards: int = 0
    slim_tokens_processed: int = 0
    draft_forwards: int = 0
    draft_tokens_processed: int = 0
    drafted: int = 0
    tier_a: int = 0
    tier_b: int = 0
    tier_c: int = 0
    rejections: int = 0
    rejections_b: int = 0
    rejections_c: int = 0
    blocks: int = 0
    block_drafts: list[int] = field(default_factory=list)
    divergence_rate: float | None = None
    lossless: bool = True
    wall_time_s: float = 0.0
    forward_time_s: dict[str, float] = field(default_factory=dict)

    @property
    def rejection_rate(self) -> float:
        return self.rejections / self.drafted if self.drafted else 0.0

    @property
    def tokens_per_target_forward(self) -> float | None:
        return self.tokens / self.target_forwards if self.target_forwards else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["rejection_rate"] = self.rejection_rate
        d["tokens_per_target_forward"] = self.tokens_per_target_forward
        return d

    def add_time(self, role: str, seconds: float) -> None:
        self.forward_time_s[role] = self.forward_time_s.get(role, 0.0) + seconds


@dataclass
class GenerationResult:
    """``sequences``: prompt + generated ids ``[1, T]``; ``stats``: :class:`DecodeStats`."""

    sequences: torch.Tensor
    stats: DecodeStats
    prompt_length: int = 0

    @property
    def new_tokens(self) -> list[int]:
        return self.sequences[0, self.prompt_length :].tolist()


class ForwardCounter:
    """Counts ``forward`` calls of any ``nn.Module`` and the input tokens they processed.

    >>> with ForwardCounter(model) as c:
    ...     model(ids)
    >>> c.calls, c.tokens
    """

    def __init__(self, module: nn.Module) -> None:
        if not isinstance(module, nn.Module):
            from via_sd.errors import ViaSDTypeError

            raise ViaSDTypeError(f"ForwardCounter needs an nn.Module, got {type(module).__name__}")
        self.module = module
        self.calls = 0
        self.tokens = 0
        self.seconds = 0.0
        self._t0 = 0.0
        self._pre = module.register_forward_pre_hook(self._start, with_kwargs=True)
        self._post = module.register_forward_hook(self._stop)

    def _start(self, mod: nn.Module, args: tuple, kwargs: dict) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:
            ids = kwargs.get("inputs_embeds")
        if isinstance(ids, torch.Tensor) and ids.dim() >= 2:
            self.tokens += int(ids.shape[1])
        self.calls += 1
        self._t0 = time.perf_counter()

    def _stop(self, mod: nn.Module, args: tuple, out: Any) -> None:
        self.seconds += time.perf_counter() - self._t0

    def remove(self) -> None:
        self._pre.remove()
        self._post.remove()

    def __enter__(self) -> ForwardCounter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()
