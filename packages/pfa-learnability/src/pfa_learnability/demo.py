"""``llmcore demo pfa-learnability``: count distribution, tilted corpora and both slopes at demo
size (10 planted-confounder automata, N = 2,000 strings, add-α oracle-state learner)."""

from __future__ import annotations

import time
from typing import Any


def run(n_automata: int = 10, n_strings: int = 2000, print_table: bool = True) -> dict[str, Any]:
    """Flat dict of demo results (numpy only; trains no neural model)."""
    from .analysis import compare, planted_suite, run_interventional
    from .pfa import PFA
    from .sampling import sample_corpus
    from .semiring import count_distribution

    t0 = time.perf_counter()
    pfa = PFA.random(seed=3)
    Z = count_distribution(pfa, "sym:b", 4)
    freq = {}
    for f in (0.5, 1.0, 2.0):
        c = sample_corpus(pfa, "sym:b", f=f, n=n_strings, seed=0)
        freq[f] = c.meta["realised_freq"]["per_string"] / c.meta["natural_freq"]["per_string"]
    suite = planted_suite(n_automata, seed=0)
    rows = run_interventional(suite, n_strings=n_strings)
    res = compare([r for r in rows if r["factor"] == 1.0], rows)
    out = {
        "Z(sym:b, B=4)": [round(float(z), 4) for z in Z],
        **{f"realised/natural at f={f}": round(v, 3) for f, v in freq.items()},
        "slope_corr": round(res["slope_corr"], 3),
        "slope_int": round(res["slope_int"], 3),
        "slope_adjusted": round(res["slope_adjusted"], 3),
        "cis_disjoint": res["cis_disjoint"],
        "cells": res["n_cells_int"],
        "seconds": round(time.perf_counter() - t0, 1),
    }
    if print_table:
        for k, v in out.items():
            print(f"{k:>28}: {v}")
    return out
