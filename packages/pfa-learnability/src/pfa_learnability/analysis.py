"""Correlational, interventional and adjusted learnability analyses (paper's causal graph).

Graph: A → F → D → θ → L_τ and A → U → L_τ (confounders U: out-degree and entropy of the source
state, ``p_τ``, expected visits, mean length). The correlational estimator regresses ``log L_τ``
on ``log F`` across automata (confounded through U); the interventional one sets
``do(F = f·F_nat)`` by tilting corpora and regresses within each automaton.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import PFAValidationError
from .kl import bernoulli_kl, categorical_kl
from .learners import AddAlphaStateLearner, expected_decision_kl
from .pfa import PFA, as_generator
from .sampling import Corpus, pushed_pfa, sample_corpus, tilt_theta
from .semiring import ArcProperty, StateEntryProperty

FACTORS: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0)


@dataclass(frozen=True)
class Target:
    """One (automaton, targeted arc) pair of an experiment."""

    automaton_id: str
    pfa: PFA
    arc: ArcProperty

    @property
    def decision(self) -> tuple[int, int]:
        return self.arc.q, self.pfa.sym_index[self.arc.sym]


def plant_arc_probability(pfa: PFA, q: int, sym: str, p_tau: float) -> PFA:
    """``pfa`` with ``p(sym | q) = p_tau``; the other outcomes of q are rescaled."""
    a = pfa.sym_index[sym]
    on = (pfa.src == q) & (pfa.sym == a)
    old = float(pfa.prob[on].sum())
    if old <= 0:
        raise PFAValidationError(f"state {q} has no {sym!r} arc to plant a probability on")
    scale = (1 - p_tau) / (1 - old)
    prob = np.where(pfa.src == q, pfa.prob * scale, pfa.prob)
    prob = np.where(on, pfa.prob * p_tau / old, prob)
    final = pfa.final.copy()
    final[q] *= scale
    arcs = [
        (int(s), pfa.alphabet[x], int(d), float(p))
        for s, x, d, p in zip(pfa.src, pfa.sym, pfa.dst, prob, strict=True)
    ]
    return PFA(pfa.n, pfa.alphabet, pfa.initial, arcs, final)


def planted_suite(
    n_automata: int = 30,
    seed: int = 0,
    p_tau_range: tuple[float, float] = (0.03, 0.5),
    constant_p_tau: float | None = None,
    visits_range: tuple[float, float] = (1.5, 3.0),
    **random_kwargs: Any,
) -> list[Target]:
    """Random PDFAs with one targeted arc each and a *planted* confounder.

    ``p_τ ~ LogUniform(p_tau_range)`` (or ``constant_p_tau`` for the unconfounded control) and
    the source state is the one whose expected visits per string is closest to a target drawn
    log-uniformly from ``visits_range`` (narrow by default, so ``p_τ`` drives the natural
    frequency ``F = visits·p_τ``).
    """
    rng = as_generator(seed)
    out: list[Target] = []
    attempt = 0
    while len(out) < n_automata:
        attempt += 1
        if attempt > 50 * n_automata:
            raise PFAValidationError("could not generate the planted suite: widen visits_range")
        base = PFA.random(seed=rng, **random_kwargs)
        p_tau = constant_p_tau or float(np.exp(rng.uniform(*np.log(p_tau_range))))
        goal = float(np.exp(rng.uniform(*np.log(visits_range))))
        best: tuple[float, PFA, ArcProperty] | None = None
        for q in range(1, base.n):
            arcs = np.flatnonzero(base.src == q)
            if len(arcs) == 0:
                continue
            e = int(rng.choice(arcs))
            sym = base.alphabet[base.sym[e]]
            try:
                planted = plant_arc_probability(base, q, sym, p_tau)
            except PFAValidationError:
                continue
            v = planted.expected_visits()[q]
            if v <= 0:
                continue
            gap = abs(np.log(v / goal))
            if best is None or gap < best[0]:
                best = (gap, planted, ArcProperty(q, sym, int(base.dst[e])))
        if best is None or best[0] > 0.25:
            continue
        out.append(Target(f"A{len(out):03d}", best[1], best[2]))
    return out


def confounders(pfa: PFA, q: int) -> dict[str, float]:
    """U: out-degree and next-outcome entropy of ``q``, expected visits, mean length."""
    row = pfa.next_symbol_table()[q]
    nz = row[row > 0]
    return {
        "out_degree": int(np.count_nonzero(pfa.src == q)),
        "entropy": float(-(nz * np.log(nz)).sum()),
        "visits": float(pfa.expected_visits()[q]),
        "mean_length": pfa.mean_length(),
    }


def oracle_decision_kl(
    reference: PFA,
    learner: AddAlphaStateLearner,
    decision: tuple[int, int],
    expected: bool,
) -> tuple[float, float]:
    """Per-visit decision KL of the oracle-state learner at ``decision = (q, a)`` (constant over
    visits, so exact) — realised, or its expectation given the realised visits — and the total
    KL ``Σ_q E[visits_q]·KL(p(·|q)‖q̂(·|q))`` under ``reference``."""
    q, a = decision
    p_tab = reference.next_symbol_table()
    q_tab = learner.table()
    p_tau = float(p_tab[q, a])
    if expected:
        dec = expected_decision_kl(p_tau, int(learner.visits[q]), learner.alpha, learner.K)
    else:
        dec = float(bernoulli_kl(p_tau, q_tab[q, a]))
    total = float(reference.expected_visits() @ categorical_kl(p_tab, q_tab))
    return dec, total


def _row(
    t: Target,
    factor: float,
    corpus: Corpus,
    seed: int,
    arch: str,
    dec: float,
    total: float,
) -> dict[str, Any]:
    q = t.arc.q
    u = confounders(t.pfa, q)
    u["p_tau"] = float(t.pfa.next_symbol_table()[t.decision])
    occ_tau = int(
        np.sum((corpus.batch.states[:, :-1] == q) & (corpus.batch.symbols == t.decision[1]))
    )
    visits = int(np.sum(corpus.batch.states == q))
    return {
        "id": f"{t.automaton_id}|{t.arc}|{factor:g}|{seed}|{arch}",
        "automaton_id": t.automaton_id,
        "prop": str(t.arc),
        "factor": float(factor),
        "natural_freq": u["visits"] * u["p_tau"],
        "realised_freq": occ_tau / len(corpus),
        "realised_visits": visits,
        "realised_occurrences": occ_tau,
        "seed": int(seed),
        "arch": arch,
        "decision_kl": float(dec),
        "total_kl": float(total),
        "confounders": u,
    }


def run_cells(
    targets: Sequence[Target],
    factors: Iterable[float] = (1.0,),
    n_strings: int = 5000,
    seeds: Sequence[int] = (0,),
    alpha: float = 0.5,
    expected: bool = True,
    learner: str = "add-alpha",
    writer: Any = None,
    train_fn: Callable[..., tuple[float, float]] | None = None,
    max_length: int = 4096,
) -> list[dict[str, Any]]:
    """One row per (automaton, factor, seed): sample the corpus (``tilt`` on the source state's
    entries), train the learner, score the decision KL against the training reference.

    ``writer`` (an :class:`llmcore.data.ResultsWriter`) makes the run resumable by row id.
    ``train_fn(target, corpus, reference, seed) -> (decision_kl, total_kl)`` plugs in a
    neural learner; the default is the add-α oracle-state learner.
    """
    rows: list[dict[str, Any]] = []
    for t in targets:
        enter = StateEntryProperty(t.arc.q)
        for f in factors:
            for s in seeds:
                rid = f"{t.automaton_id}|{t.arc}|{float(f):g}|{s}|{learner}"
                if writer is not None and writer.is_done(rid):
                    continue
                corpus = sample_corpus(
                    t.pfa, enter, mode="tilt", f=f, n=n_strings, seed=s, max_length=max_length
                )
                ref = corpus.sampler or t.pfa
                if train_fn is None:
                    lrn = AddAlphaStateLearner(t.pfa, alpha).fit(corpus)
                    dec, total = oracle_decision_kl(ref, lrn, t.decision, expected)
                else:
                    dec, total = train_fn(t, corpus, ref, s)
                row = _row(t, f, corpus, s, learner, dec, total)
                rows.append(row)
                if writer is not None:
                    writer.write(row)
    return rows


def run_correlational(targets: Sequence[Target], **kw: Any) -> list[dict[str, Any]]:
    """Natural corpora (f = 1) for every target (paper's correlational practice)."""
    return run_cells(targets, factors=(1.0,), **kw)


def run_interventional(
    targets: Sequence[Target], factors: Iterable[float] = FACTORS, **kw: Any
) -> list[dict[str, Any]]:
    """Tilted corpora ``do(F = f·F_nat)`` for every target and factor."""
    return run_cells(targets, factors=factors, **kw)


# ---------------------------------------------------------------------- estimators
def _ols_slope(x: np.ndarray, y: np.ndarray) -> float:
    x = x - x.mean()
    return float((x * (y - y.mean())).sum() / (x * x).sum())


def _cell_means(
    rows: Sequence[dict[str, Any]], key: str
) -> dict[tuple[str, float], dict[str, float]]:
    """Mean over seeds of log decision KL and log ``key`` per (automaton, factor)."""
    acc: dict[tuple[str, float], list[tuple[float, float]]] = {}
    for r in rows:
        acc.setdefault((r["automaton_id"], r["factor"]), []).append(
            (np.log(r["decision_kl"]), np.log(r[key]) if key != "factor" else np.log(r["factor"]))
        )
    return {
        k: {"logL": float(np.mean([a for a, _ in v])), "logX": float(np.mean([b for _, b in v]))}
        for k, v in acc.items()
    }


def correlational_slope(
    rows: Sequence[dict[str, Any]], n_boot: int = 1000, seed: int = 0
) -> tuple[float, tuple[float, float]]:
    """OLS slope of log decision KL on log realised frequency across automata, bootstrap CI."""
    cells = _cell_means([r for r in rows if r["factor"] == 1.0], "realised_freq")
    x = np.array([c["logX"] for c in cells.values()])
    y = np.array([c["logL"] for c in cells.values()])
    rng = as_generator(seed)
    boots = []
    for _ in range(n_boot):
        i = rng.integers(0, len(x), len(x))
        if np.ptp(x[i]) > 0:
            boots.append(_ols_slope(x[i], y[i]))
    return _ols_slope(x, y), (float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5)))


def interventional_slope(
    rows: Sequence[dict[str, Any]], n_boot: int = 1000, seed: int = 0
) -> tuple[float, tuple[float, float], dict[str, float]]:
    """Mean within-automaton OLS slope of log decision KL on log f, bootstrap CI over automata."""
    cells = _cell_means(rows, "factor")
    per: dict[str, list[tuple[float, float]]] = {}
    for (aid, _), c in cells.items():
        per.setdefault(aid, []).append((c["logX"], c["logL"]))
    slopes = {
        aid: _ols_slope(np.array([a for a, _ in v]), np.array([b for _, b in v]))
        for aid, v in per.items()
        if len(v) >= 2
    }
    s = np.array(list(slopes.values()))
    rng = as_generator(seed)
    boots = [s[rng.integers(0, len(s), len(s))].mean() for _ in range(n_boot)]
    return (
        float(s.mean()),
        (float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))),
        slopes,
    )


def adjusted_slope(rows: Sequence[dict[str, Any]]) -> float:
    """Coefficient of log F when regressing log decision KL on log F and the confounders
    ``log p_τ``, source-state entropy, out-degree and log mean length (natural corpora)."""
    nat = [r for r in rows if r["factor"] == 1.0]
    X = np.array(
        [
            [
                1.0,
                np.log(r["realised_freq"]),
                np.log(r["confounders"]["p_tau"]),
                r["confounders"]["entropy"],
                r["confounders"]["out_degree"],
                np.log(r["confounders"]["mean_length"]),
            ]
            for r in nat
        ]
    )
    y = np.log([r["decision_kl"] for r in nat])
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    return float(coef[1])


def compare(
    rows_corr: Sequence[dict[str, Any]],
    rows_int: Sequence[dict[str, Any]],
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Correlational vs interventional (and adjusted) slopes with 95 % bootstrap CIs and cells."""
    sc, cc = correlational_slope(rows_corr, n_boot, seed)
    si, ci, _ = interventional_slope(rows_int, n_boot, seed)
    return {
        "slope_corr": sc,
        "ci_corr": cc,
        "slope_int": si,
        "ci_int": ci,
        "slope_adjusted": adjusted_slope(rows_corr),
        "difference": sc - si,
        "cis_disjoint": bool(cc[0] > ci[1] or cc[1] < ci[0]),
        "n_cells_corr": len(rows_corr),
        "n_cells_int": len(rows_int),
        "n_automata": len({r["automaton_id"] for r in rows_int}),
    }


__all__ = [
    "FACTORS",
    "Target",
    "adjusted_slope",
    "compare",
    "confounders",
    "correlational_slope",
    "interventional_slope",
    "oracle_decision_kl",
    "plant_arc_probability",
    "planted_suite",
    "pushed_pfa",
    "run_cells",
    "run_correlational",
    "run_interventional",
    "tilt_theta",
]
