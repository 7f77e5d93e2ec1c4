"""Experiment runner and report behind ``pfa-learnability experiment|report``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .analysis import Target, compare, planted_suite, run_cells
from .config import ExperimentConfig


def suite_from_config(c: ExperimentConfig) -> list[Target]:
    return planted_suite(
        c.n_automata,
        seed=c.suite_seed,
        p_tau_range=(c.p_tau_min, c.p_tau_max),
        constant_p_tau=c.constant_p_tau,
        visits_range=(c.visits_min, c.visits_max),
    )


def neural_train_fn(c: ExperimentConfig) -> Any:
    """Train one LM per cell and score its decision KL against the training reference."""

    def fn(t: Target, corpus: Any, reference: Any, seed: int) -> tuple[float, float]:
        from .kl import decomposed_kl
        from .neural import LMNextSymbolModel, train_lm

        model, tok = train_lm(
            corpus.strings(), arch=c.learner, d_model=c.d_model, n_layers=c.n_layers,
            steps=c.steps, seed=seed, alphabet=t.pfa.alphabet, max_length=512,
        )  # fmt: skip
        lm = LMNextSymbolModel(model, tok, t.pfa.alphabet)
        rep = decomposed_kl(reference, lm, t.arc, n_eval=c.n_eval, seed=seed, base=t.pfa)
        key = f"{t.arc.q}:{t.arc.sym}"
        return rep.decision_kl[key], rep.total

    return fn


def run_experiment(c: ExperimentConfig, kind: str, writer: Any = None) -> list[dict[str, Any]]:
    """Rows of the correlational (f = 1) or interventional (all factors) experiment."""
    suite = suite_from_config(c)
    factors = (1.0,) if kind == "correlational" else tuple(c.factors)
    fn = None if c.learner == "add-alpha" else neural_train_fn(c)
    return run_cells(
        suite, factors=factors, n_strings=c.n_strings, seeds=tuple(c.seeds), alpha=c.alpha,
        expected=c.expected, learner=c.learner, writer=writer, train_fn=fn,
    )  # fmt: skip


def report(paths: Sequence[str | Path]) -> dict[str, Any]:
    """Slopes, CIs and cell counts from results JSONL (rows with f = 1 are the correlational
    cells; rows with several factors per automaton the interventional ones)."""
    from llmcore.data import read_jsonl

    rows: list[dict[str, Any]] = [r for p in paths for r in read_jsonl(p)]
    corr = [r for r in rows if r["factor"] == 1.0]
    factors = {}
    for r in rows:
        factors.setdefault(r["automaton_id"], set()).add(r["factor"])
    inter = [r for r in rows if len(factors[r["automaton_id"]]) > 1]
    out: dict[str, Any] = {"n_rows": len(rows)}
    if inter:
        out.update(compare(corr, inter))
    elif corr:
        from .analysis import adjusted_slope, correlational_slope

        s, ci = correlational_slope(corr)
        out.update(
            slope_corr=s, ci_corr=ci, slope_adjusted=adjusted_slope(corr), n_cells_corr=len(corr)
        )
    return out
