"""Learners whose decision KL is measured: the add-α oracle-state learner (exactly analysable)
and helpers shared by the neural learners."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.stats import binom

from .errors import PFAValidationError
from .kl import bernoulli_kl
from .pfa import PFA, SampleBatch


class AddAlphaStateLearner:
    """Add-α estimate of each state's next-outcome distribution from a corpus ("oracle-state"
    learner: it is told the true PDFA state of every prefix).

    ``q̂(a | q) = (c(q, a) + α) / (n_q + α·(|Σ|+1))`` over ``Σ ∪ {EOS}``, so a decision seen
    ``n_q`` times has expected decision KL ``≈ 1/(2 n_q)`` whatever its probability.
    """

    def __init__(self, pfa: PFA, alpha: float = 0.5) -> None:
        if alpha <= 0:
            raise PFAValidationError(f"alpha must be > 0, got {alpha}")
        if not pfa.is_deterministic():
            raise PFAValidationError("the oracle-state learner needs a deterministic automaton")
        self.pfa, self.alpha = pfa, float(alpha)
        self.K = len(pfa.alphabet) + 1
        self.counts = np.zeros((pfa.n, self.K))

    def fit(self, data: Any) -> AddAlphaStateLearner:
        """Count (state, outcome) pairs in a :class:`~pfa_learnability.sampling.Corpus`, a
        :class:`SampleBatch` or a list of symbol lists."""
        batch = _as_batch(self.pfa, data)
        N, L = batch.symbols.shape
        if N and batch.states.shape == (N, L + 1) and (batch.states[:, 0] >= 0).all():
            states = batch.states  # the sampler's own (base) state traces
        else:
            states = self.pfa.run_deterministic(batch.symbols, batch.lengths)
        outcome = np.full((N, L + 1), -1, dtype=np.int64)
        outcome[:, :L] = batch.symbols
        outcome[np.arange(N), batch.lengths] = self.K - 1  # EOS at the end
        on = outcome >= 0
        self.counts = np.zeros((self.pfa.n, self.K))
        np.add.at(self.counts, (states[on], outcome[on]), 1.0)
        return self

    @property
    def visits(self) -> np.ndarray:
        return self.counts.sum(1)

    def table(self) -> np.ndarray:
        """``q̂(a | q)``, shape ``(n, |Σ|+1)``."""
        c = self.counts + self.alpha
        return c / c.sum(1, keepdims=True)

    def next_distributions(self, symbols: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        states = self.pfa.run_deterministic(symbols, lengths)
        return self.table()[np.maximum(states, 0)]


def expected_decision_kl(p: float, n: int, alpha: float, K: int) -> float:
    """``E_{c~Bin(n,p)} KL_Bern(p ‖ (c+α)/(n+Kα))``: the add-α learner's expected decision KL
    given ``n`` visits (exact sum over the binomial)."""
    n = int(n)
    c = np.arange(n + 1)
    w = binom.pmf(c, n, p)
    return float(np.sum(w * bernoulli_kl(p, (c + alpha) / (n + K * alpha))))


def _as_batch(pfa: PFA, data: Any) -> SampleBatch:
    if isinstance(data, SampleBatch):
        return data
    batch = getattr(data, "batch", None)
    if isinstance(batch, SampleBatch):
        return batch
    strings: Sequence[Sequence[str]] = list(data)
    lengths = np.array([len(s) for s in strings], dtype=np.int64)
    L = int(lengths.max()) if len(strings) else 0
    sym = np.full((len(strings), L), -1, dtype=np.int64)
    for i, s in enumerate(strings):
        sym[i, : len(s)] = pfa.encode(s)
    return SampleBatch(
        sym,
        np.full((len(strings), L + 1), -1),
        lengths,
        np.zeros(len(strings), np.int64),
        pfa.alphabet,
    )


def batch_from_strings(pfa: PFA, strings: Sequence[Sequence[str]]) -> SampleBatch:
    """Padded symbol ids of ``strings`` (for scoring strings read from files)."""
    return _as_batch(pfa, strings)
