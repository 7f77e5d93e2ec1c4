"""Identification quantities of the latent-selection analysis.

For a policy whose log-odds of a local event E are a free logit theta_E, the REINFORCE gradient
of the expected reward is ``dE[R]/dtheta_E = p0(E) (1 - p0(E)) Delta_E`` with
``Delta_E = E[R | E] - E[R | not E]``: E is enriched iff it is reward-informative (Delta_E > 0)
and rollout-reachable (0 < p0 < 1). Support and coverage are the sets the SFT obstruction is
stated on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from compgen_rl.errors import CompgenError
from compgen_rl.hlsm import parse_signature
from compgen_rl.modules import Inventory, get_inventory

__all__ = ["coverage", "enrichment_rate", "reinforce_gradient_mc", "support", "uncovered"]


def enrichment_rate(p0: float, delta: float) -> float:
    """``p0 (1 - p0) Delta``: the rate at which RL raises the logit of an event (0 if p0 is 0 or 1)."""
    if not 0.0 <= p0 <= 1.0:
        raise CompgenError(f"p0={p0} must be a probability in [0, 1]")
    return float(p0 * (1.0 - p0) * delta)


def reinforce_gradient_mc(
    p0: float, r_event: float, r_other: float, *, n: int = 1_000_000, seed: int = 0
) -> float:
    """Monte-Carlo REINFORCE estimate of ``dE[R]/dtheta_E`` on a Bernoulli-event bandit.

    E ~ Bernoulli(sigmoid(theta)) with p0 = sigmoid(theta); R ~ Bernoulli(r_event) given E and
    Bernoulli(r_other) otherwise; the score of E is ``d log p(E)/d theta = E - p0``; the
    estimate is ``mean(R * (E - p0))`` (vectorised, seeded)."""
    for name, v in (("p0", p0), ("r_event", r_event), ("r_other", r_other)):
        if not 0.0 <= v <= 1.0:
            raise CompgenError(f"{name}={v} must be in [0, 1]")
    rng = np.random.default_rng(seed)
    e = rng.random(n) < p0
    r = rng.random(n) < np.where(e, r_event, r_other)
    return float(np.mean(r * (e - p0)))


def _rows(ds: Any) -> Iterable[Mapping[str, Any]]:
    return ds if isinstance(ds, list) else (dict(r) for r in ds)


def support(ds: Any) -> set[str]:
    """supp(D): the set of signatures in a dataset (rows with a ``signature`` column)."""
    return {r["signature"] for r in _rows(ds)}


def coverage(ds: Any, inventory: str | Inventory | None = None) -> set[str]:
    """cov(D): the modules occurring in supp(D) (restricted to ``inventory`` when given)."""
    mods = {m for s in support(ds) for pair in parse_signature(s) for m in pair}
    if inventory is not None:
        mods &= set(get_inventory(inventory).modules)
    return mods


def uncovered(ds: Any, inventory: str | Inventory) -> list[str]:
    """Inventory modules absent from cov(D) (SFT cannot make them reachable)."""
    cov = coverage(ds)
    return [m for m in get_inventory(inventory).modules if m not in cov]
