"""Exact count-conditioned sampling and corpus-level interventions ``do(F = f·F_nat)``.

Sampling ``y ~ p(y | bin(count(y)) = k)`` walks the product automaton on states ``(q, r)``
(``r`` = remaining requirement, exact or "≥ r") whose arc weights ``δ(q,a,q')·β_{r−κ}(q')/β_r(q)``
come from the binning-semiring backward tables: no rejection. The ``tilt`` intervention samples the
exponentially tilted distribution ``p_θ(y) ∝ p(y)·e^{θ·count(y)}`` through the weight-pushed PFA.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import BinError, PFAValidationError
from .pfa import PFA, SampleBatch, as_generator
from .semiring import (
    BackwardTables,
    Property,
    _check_B,
    backward_tables,
    increments,
    parse_property,
)


# ---------------------------------------------------------------------- exact expectations
def expected_count(pfa: PFA, kappa: np.ndarray) -> float:
    """``E[count]`` per string: ``Σ_e visits(src_e)·δ_e·κ_e``."""
    v = pfa.expected_visits()
    return float(np.sum(v[pfa.src] * pfa.prob * kappa))


def natural_frequency(pfa: PFA, prop: Property | str) -> dict[str, float]:
    """Exact expected occurrences per string and per 1k symbols of the natural distribution."""
    k = increments(pfa, prop)
    c = expected_count(pfa, k)
    return {"per_string": c, "per_1k_symbols": 1000.0 * c / pfa.mean_length()}


def realised_frequency(batch: SampleBatch) -> dict[str, float]:
    """Occurrences per string and per 1k symbols in a sampled corpus."""
    n_sym = int(batch.lengths.sum())
    occ = int(batch.counts.sum())
    return {
        "per_string": occ / max(len(batch), 1),
        "per_1k_symbols": 1000.0 * occ / max(n_sym, 1),
        "n_strings": len(batch),
        "n_symbols": n_sym,
        "occurrences": occ,
    }


# ---------------------------------------------------------------------- product automaton
def product_automaton(
    pfa: PFA,
    prop: Property | str,
    B: int,
    bin_weights: Mapping[int, float],
    tables: BackwardTables | None = None,
) -> PFA:
    """The automaton of ``Σ_k π'(k)·p(y | bin k)`` on states ``(q, r)`` (paper's §2.4 walk).

    States ``q·B + r`` hold "exactly r counts still to come" (r < B), states
    ``n·B + q·(B+1) + r`` hold "at least r" (overflow bin; r floored at 0). Arc weights are
    ``δ(q,a,q')·β_{r−κ}(q')/β_r(q)``; their per-state sums equal 1 up to round-off (checked).
    """
    B = _check_B(B)
    t = tables or backward_tables(pfa, prop, B)
    kappa = t.kappa
    n = pfa.n
    Z = np.append(t.exact @ pfa.initial, t.ge[B] @ pfa.initial)
    w = {int(k): float(v) for k, v in bin_weights.items() if float(v) != 0.0}
    for k, v in w.items():
        if not 0 <= k <= B:
            raise BinError(f"bin {k} is outside 0..{B} (B={B}; bin {B} is 'count >= {B}')")
        if v < 0:
            raise BinError(f"bin weight for bin {k} is negative ({v})")
        if Z[k] <= 0:
            ok = [int(i) for i in np.flatnonzero(Z > 0)]
            raise BinError(f"bin {k} has zero probability mass (Z[{k}] = 0); achievable bins: {ok}")
    tot = sum(w.values())
    if tot <= 0:
        raise BinError("bin weights sum to 0: give at least one positive weight")
    ns = n * B + n * (B + 1)

    def ex(q: np.ndarray | int, r: np.ndarray | int) -> Any:
        return q * B + r

    def ge(q: np.ndarray | int, r: np.ndarray | int) -> Any:
        return n * B + q * (B + 1) + r

    arcs: list[tuple[int, str, int, float]] = []
    final = np.zeros(ns)
    base = np.concatenate([np.repeat(np.arange(n), B), np.repeat(np.arange(n), B + 1)])
    syms = pfa.alphabet
    out_sum = np.zeros(ns)
    for r in range(B):
        den = t.exact[r]
        live = den > 0
        for e in range(pfa.n_arcs):
            q, q2, p, k = int(pfa.src[e]), int(pfa.dst[e]), pfa.prob[e], int(kappa[e])
            if not live[q] or r - k < 0:
                continue
            wt = p * t.exact[r - k][q2] / den[q]
            if wt > 0:
                arcs.append((ex(q, r), syms[pfa.sym[e]], ex(q2, r - k), wt))
                out_sum[ex(q, r)] += wt
        if r == 0:
            final[ex(np.arange(n), 0)] = np.where(live, pfa.final / np.where(live, den, 1), 0)
        dead = ex(np.flatnonzero(~live), r)
        final[dead] = 1.0
    for r in range(B + 1):
        den = t.ge[r]
        live = den > 0
        for e in range(pfa.n_arcs):
            q, q2, p, k = int(pfa.src[e]), int(pfa.dst[e]), pfa.prob[e], int(kappa[e])
            if not live[q]:
                continue
            r2 = max(r - k, 0)
            wt = p * t.ge[r2][q2] / den[q]
            if wt > 0:
                arcs.append((ge(q, r), syms[pfa.sym[e]], ge(q2, r2), wt))
                out_sum[ge(q, r)] += wt
        if r == 0:
            final[ge(np.arange(n), 0)] = np.where(live, pfa.final / np.where(live, den, 1), 0)
        final[ge(np.flatnonzero(~live), r)] = 1.0
    # normalisation is the "free correctness check" of the tables
    tot_out = out_sum + final
    bad = np.abs(tot_out - 1) > 1e-6
    if bad.any():
        raise PFAValidationError(
            f"product automaton not normalised (max error {np.abs(tot_out - 1).max():.3g}); "
            "the automaton is numerically ill-conditioned"
        )
    initial = np.zeros(ns)
    for k, v in w.items():
        vec = t.exact[k] if k < B else t.ge[B]
        idx = ex(np.arange(n), k) if k < B else ge(np.arange(n), B)
        initial[idx] += (v / tot) * pfa.initial * vec / Z[k]
    arcs = [(q, a, q2, p / tot_out[q]) for q, a, q2, p in arcs]
    final = final / tot_out
    prod = PFA(ns, syms, initial, arcs, final, validate=False, base_state=base)
    prod.validate(tol=1e-9)
    return prod


# ---------------------------------------------------------------------- tilting
def tilted_matrix(pfa: PFA, kappa: np.ndarray, theta: float) -> np.ndarray:
    """``P_0 + Σ_m e^{θm} P_m`` restricted to the states reachable from λ (a closed set)."""
    idx = np.flatnonzero(pfa._reachable())
    return pfa.transition_matrix(pfa.prob * np.exp(theta * kappa))[np.ix_(idx, idx)]


def spectral_radius(M: np.ndarray) -> float:
    return float(np.max(np.abs(np.linalg.eigvals(M)))) if M.size else 0.0


def max_theta(pfa: PFA, kappa: np.ndarray, hi: float = 50.0) -> float:
    """Largest θ with ``ρ(P_0 + Σ_m e^{θm}P_m) < 1`` (bisection; capped at ``hi``)."""
    if spectral_radius(tilted_matrix(pfa, kappa, hi)) < 1 - 1e-9:
        return hi
    lo = 0.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if spectral_radius(tilted_matrix(pfa, kappa, mid)) < 1 - 1e-9:
            lo = mid
        else:
            hi = mid
    return lo


def pushed_pfa(pfa: PFA, prop: Property | str, theta: float) -> PFA:
    """The tilted distribution ``p_θ(y) ∝ p(y)·e^{θ·count(y)}`` as a PFA on the same states.

    Weight pushing: ``p_θ(a,q'|q) = δ(q,a,q')·e^{θκ}·γ_θ(q')/γ_θ(q)``, ``p_θ(stop|q) =
    ρ(q)/γ_θ(q)`` with ``(I − P_0 − Σ_m e^{θm}P_m) γ_θ = ρ``; exists while the spectral radius
    of the tilted matrix is below 1.
    """
    kappa = increments(pfa, prop)
    M = tilted_matrix(pfa, kappa, theta)
    rho = spectral_radius(M)
    if rho >= 1 - 1e-12:
        raise BinError(
            f"tilt θ={theta:.4g} is out of reach: spectral radius {rho:.4g} >= 1 (the tilted "
            f"mass diverges); the largest admissible θ is {max_theta(pfa, kappa):.4g}"
        )
    idx = np.flatnonzero(pfa._reachable())
    gamma = np.ones(pfa.n)  # unreachable states keep their weights (γ ≡ 1 there)
    gamma[idx] = np.linalg.solve(np.eye(len(idx)) - M, pfa.final[idx])
    live = gamma > 0
    g = np.where(live, gamma, 1.0)
    reach = np.zeros(pfa.n, dtype=bool)
    reach[idx] = True
    arcs = [
        (
            int(q),
            pfa.alphabet[a],
            int(q2),
            p * (np.exp(theta * k) * gamma[q2] / g[q] if reach[q] else 1.0),
        )
        for q, a, q2, p, k in zip(pfa.src, pfa.sym, pfa.dst, pfa.prob, kappa, strict=True)
        if live[q]
    ]
    final = np.where(live, pfa.final / g, 1.0)
    init = pfa.initial * gamma
    out = PFA(pfa.n, pfa.alphabet, init / init.sum(), arcs, final, validate=False)
    out.validate(tol=1e-8)
    return out


def tilt_theta(pfa: PFA, prop: Property | str, factor: float) -> float:
    """θ with ``E_θ[count] = factor × E_0[count]`` (bisection inside the spectral-radius bound)."""
    if not np.isfinite(factor) or factor <= 0:
        raise BinError(f"tilt factor must be a positive number, got {factor}")
    kappa = increments(pfa, prop)
    base = expected_count(pfa, kappa)
    target = factor * base
    if factor == 1.0:
        return 0.0
    if base <= 0:
        raise BinError(
            f"property {parse_property(prop)} never occurs (its arcs are unreachable from the "
            "initial states), so no tilt can change its frequency: target a reachable arc"
        )

    idx = np.flatnonzero(pfa._reachable())
    lam, rho = pfa.initial[idx], pfa.final[idx]

    def mean(theta: float) -> float:
        # E_θ[count] = d log Z(θ)/dθ = λᵀ(I − M)^{-1} M' γ / λᵀγ, M' = Σ_m m·e^{θm} P_m
        A = np.eye(len(idx)) - tilted_matrix(pfa, kappa, theta)
        gamma = np.linalg.solve(A, rho)
        w = pfa.prob * kappa * np.exp(theta * kappa)
        dM = pfa.transition_matrix(w)[np.ix_(idx, idx)]
        u = np.linalg.solve(A.T, lam)
        return float(u @ dM @ gamma / (lam @ gamma))

    hi = max_theta(pfa, kappa)
    hi_eval = hi - 1e-7 if hi < 50 else hi
    lo = -50.0
    m_hi, m_lo = mean(hi_eval), mean(lo)
    if target > m_hi * (1 + 1e-9):
        raise BinError(
            f"tilt factor {factor} is out of reach for {parse_property(prop)}: the largest "
            f"achievable mean count is {m_hi:.4g} per string (factor {m_hi / base:.4g}) under "
            "the spectral-radius bound; ask for a smaller factor"
        )
    if target < m_lo * (1 - 1e-9):
        raise BinError(
            f"tilt factor {factor} is out of reach: every string has at least {m_lo:.4g} "
            f"occurrences (factor {m_lo / base:.4g}); ask for a larger factor"
        )
    a, b = lo, hi_eval
    for _ in range(200):
        mid = 0.5 * (a + b)
        if mean(mid) < target:
            a = mid
        else:
            b = mid
        if b - a < 1e-12:
            break
    return 0.5 * (a + b)


def tilt_bin_weights(
    pfa: PFA, prop: Property | str, theta: float, B: int, overflow_tol: float = 1e-3
) -> dict[int, float]:
    """Bin weights ``π'(k) ∝ Z[k]·e^{θk}`` of the tilted distribution (k < B) and the overflow
    bin's tilted mass; raises when the overflow bin holds more than ``overflow_tol`` of it
    (inside it the bin mixture samples ``p(y | count ≥ B)``, not the tilt)."""
    t = backward_tables(pfa, prop, B)
    kappa = t.kappa
    Z = t.exact @ pfa.initial
    idx = np.flatnonzero(pfa._reachable())
    gamma = np.linalg.solve(np.eye(len(idx)) - tilted_matrix(pfa, kappa, theta), pfa.final[idx])
    Zt = float(pfa.initial[idx] @ gamma)
    pi = {k: float(Z[k] * np.exp(theta * k) / Zt) for k in range(B)}
    over = max(0.0, 1.0 - sum(pi.values()))
    if over > overflow_tol:
        raise BinError(
            f"the tilt needs more than B={B} bins: {over:.3g} of the tilted mass has count >= "
            f"{B}; use a larger B (e.g. B={4 * B}) or the pushed-PFA sampler"
        )
    pi[B] = over
    return pi


# ---------------------------------------------------------------------- corpora
@dataclass
class Corpus:
    """A sampled corpus: the strings (``SampleBatch``) and how they were made (``meta``).

    Iterates as lists of symbols; ``meta`` holds ``prop, mode, factor, B, seed, realised_freq``.
    """

    batch: SampleBatch
    meta: dict[str, Any] = field(default_factory=dict)
    sampler: PFA | None = None

    def __len__(self) -> int:
        return len(self.batch)

    def __iter__(self) -> Iterator[list[str]]:
        return iter(self.strings())

    def __getitem__(self, i: int) -> list[str]:
        n = int(self.batch.lengths[i])
        return [self.batch.alphabet[s] for s in self.batch.symbols[i, :n]]

    def strings(self) -> list[list[str]]:
        return self.batch.strings()

    def texts(self) -> list[str]:
        """One space-separated line per string (rau's format)."""
        return [" ".join(s) for s in self.strings()]

    def save(self, path: str | Path) -> Path:
        """Write ``path`` (one string per line) and the sidecar ``<stem>.meta.json``."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(self.texts()) + "\n")
        meta_path = path.with_name(path.stem + ".meta.json")
        meta_path.write_text(json.dumps(self.meta, indent=1) + "\n")
        return path

    def to_dataset(self) -> Any:
        """A ``datasets.Dataset`` with one ``text`` column."""
        from datasets import Dataset

        return Dataset.from_dict({"text": self.texts()})


def read_corpus(path: str | Path) -> tuple[list[list[str]], dict[str, Any]]:
    """Read a corpus file (and its sidecar meta, if present)."""
    path = Path(path)
    if not path.exists():
        raise PFAValidationError(f"corpus file {path} does not exist")
    lines = path.read_text().split("\n")
    if lines and lines[-1] == "":
        lines = lines[:-1]
    meta_path = path.with_name(path.stem + ".meta.json")
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    return [ln.split() for ln in lines], meta


def sample_conditioned(
    pfa: PFA,
    prop: Property | str,
    bin: int,
    B: int = 16,
    n: int = 1000,
    seed: int | np.random.Generator = 0,
    max_length: int = 512,
) -> Corpus:
    """``n`` strings from ``p(y | bin(count(y)) = bin)`` exactly (no rejection)."""
    return sample_corpus(pfa, prop, mode=f"exact:{bin}", n=n, B=B, seed=seed, max_length=max_length)


def parse_mode(mode: str, f: float | None = None) -> tuple[str, Any]:
    """``exact:k``, ``mixture:{k: w}`` (JSON or ``k=w,k=w``), ``tilt[:f]``, ``natural``."""
    head, _, rest = mode.partition(":")
    if head == "natural":
        return "tilt", 1.0
    if head == "tilt":
        return "tilt", float(rest) if rest else (1.0 if f is None else float(f))
    if head == "exact" and rest:
        try:
            return "exact", int(rest)
        except ValueError:
            pass
    if head == "mixture" and rest:
        try:
            d = (
                json.loads(rest)
                if rest.lstrip().startswith("{")
                else dict(kv.split("=") for kv in rest.split(","))
            )
            return "mixture", {int(k): float(v) for k, v in d.items()}
        except (ValueError, TypeError):
            pass
    raise BinError(
        f"cannot parse sampling mode {mode!r}: use exact:<k>, mixture:{{k: w}}, tilt[:f] or natural"
    )


def sample_corpus(
    pfa: PFA,
    prop: Property | str,
    mode: str = "tilt",
    f: float = 1.0,
    n: int = 20000,
    B: int = 16,
    seed: int | np.random.Generator = 0,
    max_length: int = 512,
    tilt_method: str = "pushed",
) -> Corpus:
    """A corpus of ``n`` strings under the intervention ``mode`` (paper's ``do(F = f·F_nat)``).

    ``tilt`` samples ``p_θ`` with ``E_θ[count] = f·E[count]`` from the pushed PFA
    (``tilt_method="pushed"``) or as a mixture of exact bins (``"bins"``); ``exact:k`` and
    ``mixture:{k: w}`` sample bins from the given weights and strings from ``p(y | bin)``. The
    realised frequency is stored in ``meta``; ``sampler`` is the automaton sampled from (the
    ``training`` reference of :func:`decomposed_kl`).
    """
    prop = parse_property(prop)
    B = _check_B(B)
    kind, arg = parse_mode(mode, f)
    kappa = increments(pfa, prop)
    meta: dict[str, Any] = {"prop": str(prop), "mode": kind, "B": B, "n": int(n)}
    if isinstance(seed, int):
        meta["seed"] = seed
    if kind == "tilt":
        theta = tilt_theta(pfa, prop, arg)
        meta.update(factor=float(arg), theta=theta, tilt_method=tilt_method)
        if tilt_method == "pushed":
            sampler = pfa if theta == 0.0 else pushed_pfa(pfa, prop, theta)
        elif tilt_method == "bins":
            sampler = product_automaton(pfa, prop, B, tilt_bin_weights(pfa, prop, theta, B))
        else:
            raise BinError(f"tilt_method must be 'pushed' or 'bins', got {tilt_method!r}")
    elif kind == "exact":
        meta.update(bin=arg, factor=None)
        sampler = product_automaton(pfa, prop, B, {arg: 1.0})
    else:
        meta.update(bins={str(k): v for k, v in arg.items()}, factor=None)
        sampler = product_automaton(pfa, prop, B, arg)
    inc = kappa if sampler is pfa or sampler.n == pfa.n else increments(sampler, prop)
    batch = sampler.sample_batch(int(n), seed, max_length, inc)
    if sampler.n != pfa.n:
        batch.states = np.where(
            batch.states >= 0, sampler.base_state[np.maximum(batch.states, 0)], -1
        )
    meta["natural_freq"] = natural_frequency(pfa, prop)
    meta["realised_freq"] = realised_frequency(batch)
    return Corpus(batch, meta, sampler)


def rejection_sample(
    pfa: PFA,
    prop: Property | str,
    bin: int,
    B: int,
    n: int,
    seed: int | np.random.Generator = 0,
    max_draws: int = 10_000_000,
    chunk: int = 20000,
) -> tuple[SampleBatch, int]:
    """Baseline: sample unconditionally and keep strings in ``bin`` (returns batch, draws)."""
    rng = as_generator(seed)
    kappa = increments(pfa, prop)
    kept: list[SampleBatch] = []
    got = draws = 0
    while got < n:
        if draws >= max_draws:
            raise BinError(f"rejection sampling drew {draws} strings and kept {got} < {n}")
        b = pfa.sample_batch(chunk, rng, increments=kappa)
        draws += chunk
        idx = np.flatnonzero(np.minimum(b.counts, B) == bin)
        kept.append(b.take(idx[: n - got]))
        got += min(len(idx), n - got)
    return SampleBatch.concatenate(kept), draws


def bin_counts(batch: SampleBatch, B: int) -> np.ndarray:
    """Histogram of ``min(count, B)``."""
    return np.bincount(np.minimum(batch.counts, B), minlength=B + 1)


def enumerate_strings(
    pfa: PFA, max_len: int, min_prefix_mass: float = 0.0
) -> list[tuple[tuple[int, ...], float]]:
    """Every string up to ``max_len`` with positive probability (symbol ids, probability);
    prefixes lighter than ``min_prefix_mass`` are pruned (their mass is then missing)."""
    out: list[tuple[tuple[int, ...], float]] = []
    T = pfa._symbol_tensor()
    frontier: list[tuple[tuple[int, ...], np.ndarray]] = [((), pfa.initial.copy())]
    for depth in range(max_len + 1):
        nxt = []
        for s, alpha in frontier:
            p = float(alpha @ pfa.final)
            if p > 0:
                out.append((s, p))
            if depth < max_len:
                for a in range(len(pfa.alphabet)):
                    al = alpha @ T[a]
                    if al.sum() > min_prefix_mass:
                        nxt.append(((*s, a), al))
        frontier = nxt
    return out


def string_counts(pfa: PFA, prop: Property | str, ids: Sequence[int]) -> int:
    """``count(y)`` along the unique path of ``y`` in a deterministic automaton."""
    kappa = increments(pfa, prop)
    table = {
        (int(q), int(a)): (int(q2), int(k))
        for q, a, q2, k in zip(pfa.src, pfa.sym, pfa.dst, kappa, strict=True)
    }
    q = int(np.flatnonzero(pfa.initial)[0])
    c = 0
    for a in ids:
        q, k = table[(q, int(a))]
        c += k
    return c
