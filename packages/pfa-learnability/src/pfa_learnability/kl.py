"""Decomposed KL divergence between a reference PFA and a language model (paper's metrics).

Chain rule ``KL(p‖q) = E_{y~p} Σ_t KL_t`` with exact per-position ``KL_t`` over ``Σ ∪ {EOS}``,
Monte-Carlo over strings drawn from the reference. Decompositions: per state (``Σ_q visits_q ·
mean KL_q = total``), per targeted arc by the grouping identity ``KL_t = KL_Bern(p_τ‖q_τ) +
(1 − p_τ)·KL(p(·|¬a)‖q(·|¬a))`` (the first term is the *decision KL*), and per symbol.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np

from .errors import PFAValidationError
from .pfa import PFA, SampleBatch, as_generator
from .semiring import Property, increments

_TINY = 1e-300


class NextSymbolModel(Protocol):
    """Anything that gives next-outcome distributions over ``alphabet + (EOS,)``."""

    def next_distributions(self, symbols: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """``(N, L+1, |Σ|+1)`` probabilities for padded symbol ids ``(N, L)``."""
        ...


class PFAModel:
    """A PFA used as the "model" (the oracle: KL to itself is 0)."""

    def __init__(self, pfa: PFA) -> None:
        self.pfa = pfa

    def next_distributions(self, symbols: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        return forward_pass(self.pfa, symbols, lengths)[0]


class UniformModel:
    """Uniform over ``Σ ∪ {EOS}`` (KL has a closed form: ``E Σ_t (log K − H_t)``)."""

    def __init__(self, alphabet: Sequence[str]) -> None:
        self.K = len(alphabet) + 1

    def next_distributions(self, symbols: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        N, L = symbols.shape
        return np.full((N, L + 1, self.K), 1.0 / self.K)


def forward_pass(
    pfa: PFA, symbols: np.ndarray, lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Next-outcome distributions ``(N, L+1, |Σ|+1)`` and base-state posteriors
    ``(N, L+1, n_base)`` of a (possibly non-deterministic) PFA from normalised forward vectors.

    Rows past a string's end repeat its last position (callers mask them).
    """
    N, L = symbols.shape
    Ntab = pfa.next_symbol_table()
    n_base = int(pfa.base_state.max()) + 1
    if pfa.is_deterministic():
        states = pfa.run_deterministic(symbols, lengths)
        st = np.where(states >= 0, states, states[np.arange(N), lengths][:, None])
        post = np.zeros((N, L + 1, n_base))
        np.put_along_axis(post, pfa.base_state[st][:, :, None], 1.0, axis=2)
        return Ntab[st], post
    to_base = np.zeros((pfa.n, n_base))
    to_base[np.arange(pfa.n), pfa.base_state] = 1.0
    T = pfa._symbol_tensor()
    dist = np.empty((N, L + 1, Ntab.shape[1]))
    post = np.empty((N, L + 1, n_base))
    alpha = np.tile(pfa.initial, (N, 1))
    for t in range(L + 1):
        z = alpha.sum(1, keepdims=True)
        if np.any(z[:, 0] <= 0):
            i = int(np.flatnonzero(z[:, 0] <= 0)[0])
            raise PFAValidationError(f"string {i} has probability 0 under the reference automaton")
        alpha = alpha / z
        dist[:, t] = alpha @ Ntab
        post[:, t] = alpha @ to_base
        if t < L:
            y = symbols[:, t]
            for a in np.unique(y[y >= 0]):
                rows = np.flatnonzero(y == a)
                alpha[rows] = alpha[rows] @ T[a]
    return dist, post


@dataclass
class KLReport:
    """Decomposed KL of a model against a reference (nats unless ``unit == "bits"``).

    ``decision_kl[τ]``/``rest_kl[τ]`` are per-visit means at the source state of decision
    ``τ = "q:a"`` and ``decision_kl_total[τ]`` the expected total per string (× visits).
    """

    total: float
    total_ci: tuple[float, float]
    per_state: dict[int, float]
    visits: dict[int, float]
    decision_kl: dict[str, float] = field(default_factory=dict)
    decision_kl_ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    rest_kl: dict[str, float] = field(default_factory=dict)
    decision_kl_total: dict[str, float] = field(default_factory=dict)
    per_symbol: dict[str, float] = field(default_factory=dict)
    p_tau: dict[str, float] = field(default_factory=dict)
    n_eval: int = 0
    unit: str = "nats"
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("per_state", "visits"):
            d[k] = {str(q): v for q, v in d[k].items()}
        return d


def bernoulli_kl(p: np.ndarray | float, q: np.ndarray | float) -> np.ndarray:
    """``KL(Bern(p) ‖ Bern(q))`` with ``0 log 0 = 0``."""
    p = np.asarray(p, dtype=np.float64)
    q = np.clip(np.asarray(q, dtype=np.float64), _TINY, 1 - 1e-16)
    a = np.where(p > 0, p * (np.log(np.maximum(p, _TINY)) - np.log(q)), 0.0)
    b = np.where(p < 1, (1 - p) * (np.log(np.maximum(1 - p, _TINY)) - np.log1p(-q)), 0.0)
    return a + b


def categorical_kl(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``Σ_a p log p/q`` over the last axis (``0 log 0 = 0``; ``q`` floored at 1e-300)."""
    lp = np.log(np.maximum(p, _TINY))
    lq = np.log(np.maximum(q, _TINY))
    return np.where(p > 0, p * (lp - lq), 0.0).sum(-1)


def decisions(pfa: PFA, prop: Property | str) -> list[tuple[int, int]]:
    """The (source state, symbol id) decisions of the targeted arcs (κ > 0)."""
    k = increments(pfa, prop)
    return sorted({(int(pfa.src[e]), int(pfa.sym[e])) for e in np.flatnonzero(k > 0)})


def _ratio_ci(num: np.ndarray, den: np.ndarray, idx: np.ndarray) -> tuple[float, float]:
    """Percentile 95 % bootstrap CI of ``Σ num / Σ den`` over resampled string indices."""
    d = den[idx].sum(1)
    r = np.where(d > 0, num[idx].sum(1) / np.where(d > 0, d, 1), np.nan)
    r = r[np.isfinite(r)]
    if not len(r):
        return (float("nan"), float("nan"))
    return (float(np.percentile(r, 2.5)), float(np.percentile(r, 97.5)))


def decomposed_kl(
    reference: PFA,
    model: NextSymbolModel | PFA,
    prop: Property | str | None = None,
    n_eval: int = 2000,
    seed: int | np.random.Generator = 0,
    unit: str = "nats",
    eval_batch: SampleBatch | None = None,
    n_boot: int = 1000,
    base: PFA | None = None,
    max_length: int = 512,
    tokenizer: Any = None,
) -> KLReport:
    """Decomposed ``KL(reference ‖ model)`` on ``n_eval`` strings drawn from ``reference``.

    ``reference`` is the automaton the strings are scored under (the training distribution or
    the natural PFA, see :func:`reference_automaton`); ``base`` (default: ``reference``) is the
    original automaton whose states and targeted arcs index the decomposition. With a
    ``tokenizer``, ``model`` is a causal LM wrapped in
    :class:`~pfa_learnability.neural.LMNextSymbolModel`.
    """
    import time

    if unit not in ("nats", "bits"):
        raise PFAValidationError(f"unit must be 'nats' or 'bits', got {unit!r}")
    base = reference if base is None else base
    if isinstance(model, PFA):
        model = PFAModel(model)
    elif tokenizer is not None:
        from .neural import LMNextSymbolModel

        model = LMNextSymbolModel(model, tokenizer, base.alphabet)
    rng = as_generator(seed)
    batch = (
        eval_batch if eval_batch is not None else reference.sample_batch(n_eval, rng, max_length)
    )
    sym, lens = batch.symbols, batch.lengths
    N, L = sym.shape
    t0 = time.perf_counter()
    p, post = forward_pass(reference, sym, lens)
    t1 = time.perf_counter()
    q = np.asarray(model.next_distributions(sym, lens), dtype=np.float64)
    t2 = time.perf_counter()
    if q.shape != p.shape:
        raise PFAValidationError(
            f"model returned distributions of shape {q.shape}, expected {p.shape}"
        )
    mask = (np.arange(L + 1)[None, :] <= lens[:, None]).astype(np.float64)  # (N, L+1)
    klt = categorical_kl(p, q) * mask
    scale = 1.0 / np.log(2.0) if unit == "bits" else 1.0
    per_string = klt.sum(1) * scale
    idx = rng.integers(0, N, size=(n_boot, N))
    boot = per_string[idx].mean(1)
    total = float(per_string.mean())
    wpos = post * mask[:, :, None]  # base-state weight per position
    vis_i = wpos.sum(1)  # (N, n_base)
    klq_i = np.einsum("ntq,nt->nq", wpos, klt) * scale
    visits = vis_i.mean(0)
    per_state = {
        int(s): float(klq_i[:, s].sum() / vis_i[:, s].sum()) if vis_i[:, s].sum() > 0 else 0.0
        for s in range(post.shape[2])
    }
    rep = KLReport(
        total=total,
        total_ci=(float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))),
        per_state=per_state,
        visits={int(s): float(v) for s, v in enumerate(visits)},
        n_eval=N,
        unit=unit,
        timings={"pfa_seconds": t1 - t0, "model_seconds": t2 - t1},
    )
    if prop is not None:
        for qs, a in decisions(base, prop):
            key = f"{qs}:{base.alphabet[a]}"
            pa, qa = p[:, :, a], q[:, :, a]
            dec = bernoulli_kl(pa, qa)
            rest = klt - dec
            w = wpos[:, :, qs]
            num_d = (w * dec).sum(1) * scale
            num_r = (w * rest).sum(1) * scale
            den = w.sum(1)
            D = den.sum()
            rep.decision_kl[key] = float(num_d.sum() / D) if D > 0 else float("nan")
            rep.rest_kl[key] = float(num_r.sum() / D) if D > 0 else float("nan")
            rep.decision_kl_ci[key] = _ratio_ci(num_d, den, idx)
            rep.decision_kl_total[key] = float(num_d.mean())
            rep.p_tau[key] = float((w * pa).sum() / D) if D > 0 else float("nan")
            sname = base.alphabet[a]
            rep.per_symbol[sname] = rep.per_symbol.get(sname, 0.0) + rep.decision_kl_total[key]
    return rep


def reference_automaton(pfa: PFA, corpus: Any = None, reference: str = "training") -> PFA:
    """The automaton KL is measured against: ``"training"`` = what ``corpus`` was sampled from
    (natural PFA, pushed ``p_θ`` or the bin-product automaton), ``"natural"`` = ``pfa``."""
    if reference == "natural" or corpus is None:
        return pfa
    if reference != "training":
        raise PFAValidationError(f"reference must be 'training' or 'natural', got {reference!r}")
    sampler = getattr(corpus, "sampler", None)
    return pfa if sampler is None else sampler


def grouping_terms(p: np.ndarray, q: np.ndarray, a: int) -> tuple[float, float]:
    """``(decision, weighted rest)`` of the grouping identity for one position."""
    dec = float(bernoulli_kl(p[a], q[a]))
    pr, qr = np.delete(p, a), np.delete(q, a)
    if p[a] >= 1:
        return dec, 0.0
    rest = (1 - p[a]) * float(categorical_kl(pr / pr.sum(), qr / qr.sum()))
    return dec, rest
