"""The binning semiring and exact per-count backward tables (paper's count-control device).

Counts of a targeted property live in the saturating monoid ``M_B = ({0..B}, min(i+j, B))``;
the binning semiring is its monoid semiring ``K_B = ℝ≥0[M_B]``: vectors ``w ∈ ℝ≥0^{B+1}`` with
elementwise ``⊕`` and saturating convolution ``⊗``. On an automaton the pathsum is computed from
per-count backward vectors ``β_c`` with one LU of ``I − P_0`` (all counts) and one of ``I − P``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Union

import numpy as np
from scipy.linalg import lu_factor, lu_solve

from .errors import BinError, NonTightAutomatonError, PropertyError
from .pfa import PFA


class BinningSemiring:
    """``K_B = ℝ≥0[M_B]``: polynomials in x truncated at degree B, top coefficient absorbing."""

    def __init__(self, B: int) -> None:
        B = _check_B(B)
        self.B = B
        # idx[i, j] = min(i + j, B): the saturating monoid's operation table
        self._idx = np.minimum(np.add.outer(np.arange(B + 1), np.arange(B + 1)), B)

    def zero(self) -> np.ndarray:
        return np.zeros(self.B + 1)

    def one(self) -> np.ndarray:
        e = np.zeros(self.B + 1)
        e[0] = 1.0
        return e

    def plus(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        return np.asarray(u, dtype=np.float64) + np.asarray(v, dtype=np.float64)

    def times(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``(u ⊗ v)[k] = Σ_{min(i+j,B)=k} u[i] v[j]``."""
        outer = np.multiply.outer(np.asarray(u, np.float64), np.asarray(v, np.float64))
        return np.bincount(self._idx.ravel(), weights=outer.ravel(), minlength=self.B + 1)

    def lift(self, prob: float, incr: int = 0) -> np.ndarray:
        """``p · x^κ``: ``p`` at index ``min(κ, B)``."""
        if incr < 0:
            raise PropertyError(f"increment must be >= 0, got {incr}")
        w = self.zero()
        w[min(int(incr), self.B)] = float(prob)
        return w

    def star(self, u: np.ndarray) -> np.ndarray:
        """``u* = ⊕_{k≥0} u^{⊗k}``, defined when ``u[0] < 1`` (closed form by back-substitution)."""
        u = np.asarray(u, dtype=np.float64)
        if u[0] >= 1:
            raise BinError(f"star undefined: the weight of count 0 is {u[0]} >= 1")
        # s = 1 ⊕ u ⊗ s, solved count by count; the overflow coefficient is the remainder
        B = self.B
        s = np.zeros(B + 1)
        for k in range(B):
            acc = 1.0 if k == 0 else 0.0
            acc += sum(u[i] * s[k - i] for i in range(1, k + 1))
            s[k] = acc / (1 - u[0])
        total = 1.0 / (1.0 - u.sum()) if u.sum() < 1 else np.inf
        s[B] = total - s[:B].sum()
        return s


# ---------------------------------------------------------------------- properties
@dataclass(frozen=True)
class ArcProperty:
    """The arc ``(q, sym, q2)`` (κ = 1 on it)."""

    q: int
    sym: str
    q2: int

    def __str__(self) -> str:
        return f"arc:{self.q}:{self.sym}:{self.q2}"


@dataclass(frozen=True)
class SymbolProperty:
    """Any arc emitting ``sym``."""

    sym: str

    def __str__(self) -> str:
        return f"sym:{self.sym}"


@dataclass(frozen=True)
class StateEntryProperty:
    """Any arc entering state ``q``."""

    q: int

    def __str__(self) -> str:
        return f"enter:{self.q}"


@dataclass(frozen=True)
class CustomProperty:
    """Increments from ``fn(q, sym, q2) -> int >= 0``."""

    fn: Callable[[int, str, int], int]
    name: str = "custom"

    def __str__(self) -> str:
        return self.name


Property = Union[ArcProperty, SymbolProperty, StateEntryProperty, CustomProperty]  # noqa: UP007


def parse_property(text: str | Property) -> Property:
    """``arc:<q>:<sym>:<q2>``, ``sym:<sym>`` or ``enter:<q>``."""
    if not isinstance(text, str):
        return text
    parts = text.strip().split(":")
    try:
        if parts[0] == "arc" and len(parts) == 4:
            return ArcProperty(int(parts[1]), parts[2], int(parts[3]))
        if parts[0] == "sym" and len(parts) == 2 and parts[1]:
            return SymbolProperty(parts[1])
        if parts[0] == "enter" and len(parts) == 2:
            return StateEntryProperty(int(parts[1]))
    except ValueError:
        pass
    raise PropertyError(
        f"cannot parse property {text!r}: use arc:<q>:<sym>:<q2>, sym:<sym> or enter:<q>"
    )


def increments(pfa: PFA, prop: Property | str) -> np.ndarray:
    """κ(e) for every arc of ``pfa`` (int array); raises when the property matches no arc."""
    prop = parse_property(prop)
    base = pfa.base_state
    src, dst = base[pfa.src], base[pfa.dst]
    syms = np.asarray(pfa.alphabet, dtype=object)[pfa.sym]
    if isinstance(prop, ArcProperty):
        if prop.sym not in pfa.sym_index:
            raise PropertyError(f"property {prop}: symbol {prop.sym!r} is not in the alphabet")
        k = (src == prop.q) & (pfa.sym == pfa.sym_index[prop.sym]) & (dst == prop.q2)
    elif isinstance(prop, SymbolProperty):
        if prop.sym not in pfa.sym_index:
            raise PropertyError(
                f"property {prop}: symbol {prop.sym!r} is not in {list(pfa.alphabet)}"
            )
        k = pfa.sym == pfa.sym_index[prop.sym]
    elif isinstance(prop, StateEntryProperty):
        k = dst == prop.q
    elif isinstance(prop, CustomProperty):
        k = np.array(
            [
                int(prop.fn(int(q), str(a), int(q2)))
                for q, a, q2 in zip(src, syms, dst, strict=True)
            ],
            dtype=np.int64,
        )
        if np.any(k < 0):
            raise PropertyError(f"property {prop}: negative increment {int(k.min())}")
    else:
        raise PropertyError(f"unknown property type {type(prop).__name__}")
    k = np.asarray(k, dtype=np.int64)
    if not np.any(k > 0):
        raise PropertyError(
            f"property {prop} matches no arc of the automaton (it would always count 0): "
            "pick an existing arc, symbol or entered state"
        )
    return k


def _check_B(B: int) -> int:
    if int(B) != B or int(B) < 1:
        raise BinError(f"the number of bins B must be an integer >= 1, got {B!r}")
    return int(B)


# ---------------------------------------------------------------------- backward tables
@dataclass
class BackwardTables:
    """Per-count backward vectors of an automaton and property (paper's exact tables).

    ``exact[c]`` = ``β_c`` (mass of suffixes from each state with exactly c counted units,
    c < B) and ``ge[r]`` = ``β_{≥r}`` (r = 0..B, ``ge[0]`` = ``β_tot``); shape ``(n,)`` each.
    """

    B: int
    exact: np.ndarray  # (B, n)
    ge: np.ndarray  # (B + 1, n)
    kappa: np.ndarray  # per-arc increments

    def as_dict(self) -> dict[int | str, np.ndarray]:
        d: dict[int | str, np.ndarray] = {c: self.exact[c] for c in range(self.B)}
        d["ge"] = self.ge[self.B]
        d["tot"] = self.ge[0]
        return d


def _solve_tables(pfa: PFA, kappa: np.ndarray, B: int) -> BackwardTables:
    n = pfa.n
    P0 = pfa.transition_matrix(np.where(kappa == 0, pfa.prob, 0.0))
    P = pfa.transition_matrix()
    A0 = np.eye(n) - P0
    if np.linalg.cond(A0) > 1e12:
        raise NonTightAutomatonError(
            "I - P_0 is singular: a cycle of untargeted arcs has mass 1 (components "
            f"{pfa.sccs()}); the automaton is non-tight"
        )
    lu0 = lu_factor(A0)
    max_k = int(kappa.max())
    Pm = {
        m: pfa.transition_matrix(np.where(kappa == m, pfa.prob, 0.0))
        for m in range(1, min(max_k, B) + 1)
    }
    exact = np.zeros((B, n))
    exact[0] = lu_solve(lu0, pfa.final)
    for c in range(1, B):
        rhs = np.zeros(n)
        for m, Pmat in Pm.items():
            if m <= c:
                rhs += Pmat @ exact[c - m]
        exact[c] = lu_solve(lu0, rhs)
    tot = lu_solve(lu_factor(np.eye(n) - P), pfa.final)
    ge = np.zeros((B + 1, n))
    ge[0] = tot
    csum = np.cumsum(exact, axis=0)
    for r in range(1, B + 1):
        g = tot - csum[r - 1]
        if g.min() < -1e-10:
            raise NonTightAutomatonError(
                f"backward tables are inconsistent (β_≥{r} min {g.min():.3g}); the automaton is "
                "numerically non-tight"
            )
        ge[r] = np.maximum(g, 0.0)
    return BackwardTables(B, exact, ge, kappa)


def backward_tables(pfa: PFA, prop: Property | str, B: int = 16) -> BackwardTables:
    """Exact backward values ``β_c`` (c < B) and ``β_{≥r}`` (one LU of ``I − P_0``, one of ``I − P``)."""
    B = _check_B(B)
    return _solve_tables(pfa, increments(pfa, prop), B)


def count_distribution(pfa: PFA, prop: Property | str, B: int = 16) -> np.ndarray:
    """Pathsum ``Z ∈ K_B``: ``Z[k] = P(count = k)`` for k < B and ``Z[B] = P(count ≥ B)``."""
    t = backward_tables(pfa, prop, B)
    Z = np.empty(t.B + 1)
    Z[: t.B] = t.exact @ pfa.initial
    Z[t.B] = t.ge[t.B] @ pfa.initial
    return Z


def pathsum_semiring(pfa: PFA, prop: Property | str, B: int = 16) -> np.ndarray:
    """The same pathsum by a generic semiring fixpoint (``β = ρ ⊕ Σ δ x^κ ⊗ β``), for checks."""
    K = BinningSemiring(B)
    kappa = increments(pfa, prop)
    beta = np.zeros((pfa.n, B + 1))
    for _ in range(100000):
        new = np.zeros_like(beta)
        new[:, 0] = pfa.final
        for q, q2, p, k in zip(pfa.src, pfa.dst, pfa.prob, kappa, strict=True):
            new[q] += K.times(K.lift(p, int(k)), beta[q2])
        if np.abs(new - beta).max() < 1e-15:
            beta = new
            break
        beta = new
    return pfa.initial @ beta
