"""The drafter interface: anything that proposes k next tokens for a prefix.

VIA-SD is drafter-agnostic; three built-ins cover a separate small model, prompt lookup
(n-gram matching, no model) and LayerSkip-style early exit from the target itself.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import torch
from torch import nn

from via_sd._runner import CachedRunner
from via_sd.errors import ViaSDConfigError, ViaSDTypeError
from via_sd.sampling import Sampler
from via_sd.slim import FullModel, SlimVerifier, check_decoder_only, find_layers
from via_sd.stats import DecodeStats


class Drafter(ABC):
    """Proposes draft tokens. ``propose`` returns the tokens and, when the drafter has them,
    the processed draft distributions ``[k, V]`` they were drawn from (needed for sampling)."""

    name: str = "drafter"
    #: False for drafters without probabilities (they only support greedy verification).
    has_probs: bool = True
    model: nn.Module | None = None

    def start(self, stats: DecodeStats, sampler: Sampler) -> None:
        """Called once per generation before the first ``propose``."""
        self.stats = stats
        self.sampler = sampler

    @abstractmethod
    def propose(self, committed_ids: list[int], k: int) -> tuple[list[int], torch.Tensor | None]:
        """Up to ``k`` draft tokens continuing ``committed_ids``."""

    @property
    def forwards(self) -> int:
        return 0

    @property
    def tokens_processed(self) -> int:
        """Input tokens the drafter's model processed (0 for model-free drafters)."""
        return 0


class ModelDrafter(Drafter):
    """A small causal LM p with its own KV cache (greedy or sampled drafts)."""

    def __init__(self, model: Any, name: str = "draft") -> None:
        if isinstance(model, nn.Module):
            check_decoder_only(model)
            self.lm = FullModel(model, name)
            self.model = model
        elif hasattr(model, "forward") and hasattr(model, "new_cache"):
            self.lm = model
            self.model = getattr(model, "model", None)
        else:
            raise ViaSDTypeError(
                f"ModelDrafter needs a causal LM (nn.Module), got {type(model).__name__}"
            )
        self.name = name
        self.runner: CachedRunner | None = None

    def start(self, stats: DecodeStats, sampler: Sampler) -> None:
        super().start(stats, sampler)
        dev = next(self.model.parameters()).device if self.model is not None else "cpu"
        self.runner = CachedRunner(self.lm, "draft", stats, torch.device(dev))

    @property
    def forwards(self) -> int:
        return self.runner.calls if self.runner else 0

    @property
    def tokens_processed(self) -> int:
        return self.runner.tokens if self.runner else 0

    def propose(self, committed_ids: list[int], k: int) -> tuple[list[int], torch.Tensor | None]:
        assert self.runner is not None, "call start() first"
        seq = list(committed_ids)
        toks: list[int] = []
        probs: list[torch.Tensor] = []
        for _ in range(k):
            logits = self.runner.logits_from(seq, len(seq) - 1)[-1]
            if self.sampler.greedy:
                t = int(logits.argmax())
            else:
                pr = self.sampler.probs(logits)
                t = self.sampler.sample(pr)
                probs.append(pr)
            toks.append(t)
            seq.append(t)
        return toks, (torch.stack(probs) if probs else None)


class PromptLookupDrafter(Drafter):
    """Prompt lookup decoding: find the last ``n``-gram (down to 1) of the prefix earlier in
    the prefix and propose the ``k`` tokens that followed it. No model, no probabilities, so
    greedy verification only (as HF's ``prompt_lookup_num_tokens``)."""

    has_probs = False

    def __init__(self, n: int = 2, k: int | None = None) -> None:
        if not isinstance(n, int) or n < 1:
            raise ViaSDConfigError(f"PromptLookupDrafter n must be an integer >= 1, got {n!r}")
        if k is not None and (not isinstance(k, int) or k < 1):
            raise ViaSDConfigError(f"PromptLookupDrafter k must be an integer >= 1, got {k!r}")
        self.n = n
        self.k = k
        self.name = "prompt-lookup"

    def propose(self, committed_ids: list[int], k: int) -> tuple[list[int], torch.Tensor | None]:
        k = min(k, self.k) if self.k else k
        ids = committed_ids
        for n in range(min(self.n, len(ids) - 1), 0, -1):
            tail = ids[-n:]
            for s in range(len(ids) - n - 1, -1, -1):  # most recent earlier match first
                if ids[s : s + n] == tail:
                    follow = ids[s + n : s + n + k]
                    if follow:
                        return list(follow), None
        return [], None


class EarlyExitDrafter(ModelDrafter):
    """LayerSkip-style self-drafting: the target's first ``exit_layer`` layers, then its final
    norm and LM head (the top layers are skipped, unlike the slim verifier)."""

    def __init__(self, target: nn.Module, exit_layer: int) -> None:
        L = len(find_layers(target))
        if isinstance(exit_layer, bool) or not isinstance(exit_layer, int):
            raise ViaSDConfigError(f"exit_layer must be an integer, got {exit_layer!r}")
        if not 1 <= exit_layer < L:
            raise ViaSDConfigError(
                f"exit_layer must be in [1, {L}) for a {L}-layer target, got {exit_layer}"
            )
        slim = SlimVerifier(target, skip_layers=list(range(exit_layer, L)), keep_first_last=False)
        super().__init__(slim, name=f"early-exit@{exit_layer}")
        self.model = target
        self.exit_layer = exit_layer


def as_drafter(drafter: Any) -> Drafter:
    """A :class:`Drafter` from a drafter or a causal LM (wrapped in :class:`ModelDrafter`)."""
    if isinstance(drafter, Drafter):
        return drafter
    if isinstance(drafter, nn.Module):
        return ModelDrafter(drafter)
    raise ViaSDTypeError(
        f"drafter must be a via_sd.Drafter or a causal LM nn.Module, got {type(drafter).__name__}"
    )
