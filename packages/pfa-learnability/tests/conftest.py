"""Shared seeds and small automata (built in code: nothing is downloaded)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pfa_learnability.pfa import PFA

from llmcore.zoo import pin_reference_kernels

# The CPU kernels the fixtures were calibrated with (nox sets them too); before any tensor op.
pin_reference_kernels()
torch.set_num_threads(1)


def small_pdfa(seed: int, n_states: int = 3, alphabet: int = 2, out_degree: int = 2) -> PFA:
    """A small random PDFA whose stop weights are >= 0.62 (mass beyond length 14 < 1e-6)."""
    rng = np.random.default_rng(seed)
    syms = [chr(ord("a") + i) for i in range(alphabet)]
    arcs, final = [], []
    for q in range(n_states):
        stop = rng.uniform(0.62, 0.9)
        chosen = rng.choice(alphabet, size=out_degree, replace=False)
        w = rng.dirichlet(np.ones(out_degree)) * (1 - stop)
        arcs += [
            (q, syms[a], int(rng.integers(0, n_states)), float(p))
            for a, p in zip(chosen, w, strict=True)
        ]
        final.append(stop)
    return PFA(n_states, syms, {0: 1.0}, arcs, final)


@pytest.fixture(scope="session")
def pdfa8() -> PFA:
    return PFA.random(seed=3)
