"""Expected speedups of standard SD and three-tier VIA-SD.

All functions are pure Python (no torch), usable from ``via-sd theory``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from via_sd.errors import ViaSDConfigError


def _prob(name: str, x: float) -> float:
    if not isinstance(x, int | float) or not 0.0 <= x <= 1.0:
        raise ViaSDConfigError(f"{name} must be a probability in [0, 1], got {x!r}")
    return float(x)


def _gamma(gamma: int) -> int:
    if isinstance(gamma, bool) or not isinstance(gamma, int) or gamma < 1:
        raise ViaSDConfigError(f"gamma must be an integer >= 1, got {gamma!r}")
    return gamma


def _cost(name: str, c: float) -> float:
    if not isinstance(c, int | float) or c < 0:
        raise ViaSDConfigError(f"{name} must be a cost ratio >= 0, got {c!r}")
    return float(c)


def geometric_tokens(s: float, gamma: int) -> float:
    """E[N] = (1 - s^(γ+1)) / (1 - s): expected tokens per block (γ+1 when s = 1)."""
    if s >= 1.0:
        return float(gamma + 1)
    return (1.0 - s ** (gamma + 1)) / (1.0 - s)


def sd_expected_tokens(alpha: float, gamma: int) -> float:
    """Expected tokens per target call of standard SD (Leviathan et al. 2023, Eq. 1)."""
    return geometric_tokens(_prob("alpha", alpha), _gamma(gamma))


def sd_speedup(alpha: float, gamma: int, c: float) -> float:
    """S_SD = (1 - α^(γ+1)) / ((1 - α)(γc + 1)): wall-clock speedup over AR."""
    return sd_expected_tokens(alpha, gamma) / (_gamma(gamma) * _cost("c", c) + 1.0)


def optimal_gamma(alpha: float, c: float, max_gamma: int = 32) -> int:
    """γ* = argmax_γ S_SD(α, γ, c) over 1..max_gamma."""
    return max(range(1, _gamma(max_gamma) + 1), key=lambda g: sd_speedup(alpha, g, c))


@dataclass(frozen=True)
class ViaBlockModel:
    """The three-tier block model: s, u, w, E[N], P(no q call), cost per block, speedup."""

    s: float
    u: float
    w: float
    expected_tokens: float
    p_no_target: float
    target_calls_per_block: float
    cost_per_block: float
    speedup: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def via_block_model(
    a: float,
    b: float,
    e: float,
    kappa_b: float,
    kappa_c: float,
    gamma: int,
    c: float,
    c_s: float,
) -> ViaBlockModel:
    """Three-tier block model: s = a + bκ_B + eκ_C, u = a + bκ_B, w = b(1-κ_B);
    P_noq = w(1-u^γ)/(1-u) + u^γ; cost C = γc + c_s + (1 - P_noq); S_VIA = E[N]/C."""
    a, b, e = _prob("a", a), _prob("b", b), _prob("e", e)
    if abs(a + b + e - 1.0) > 1e-6:
        raise ViaSDConfigError(f"tier probabilities must sum to 1, got a+b+e={a + b + e}")
    kb, kc = _prob("kappa_b", kappa_b), _prob("kappa_c", kappa_c)
    g = _gamma(gamma)
    c, c_s = _cost("c", c), _cost("c_s", c_s)
    s = a + b * kb + e * kc
    u = a + b * kb
    w = b * (1.0 - kb)
    geo_u = float(g) if u >= 1.0 else (1.0 - u**g) / (1.0 - u)
    p_noq = w * geo_u + u**g
    n = geometric_tokens(s, g)
    cost = g * c + c_s + (1.0 - p_noq)
    return ViaBlockModel(s, u, w, n, p_noq, 1.0 - p_noq, cost, n / cost)


def via_target_calls_per_block(
    a: float,
    b: float,
    e: float,
    kappa_b: float,
    kappa_c: float,
    block_drafts: Iterable[int],
) -> float:
    """Expected target calls per block, the block model applied to each block's own draft
    length (``DecodeStats.block_drafts``): mean over blocks of 1 - P_noq(γ_b).

    The closed form assumes every block offers γ drafts; real runs end blocks early at an EOS
    or the token budget, and a block with fewer positions calls q less often. A block with no
    draft positions calls q 0 times (VIA-SD's bonus token then comes from q')."""
    gs = [int(g) for g in block_drafts]
    if not gs:
        raise ViaSDConfigError("block_drafts is empty: run at least one block")
    if any(g < 0 for g in gs):
        raise ViaSDConfigError("block draft lengths must be >= 0")
    calls = {
        g: via_block_model(a, b, e, kappa_b, kappa_c, g, 0.0, 0.0).target_calls_per_block
        for g in set(gs)
        if g > 0
    }
    return sum(calls.get(g, 0.0) for g in gs) / len(gs)


def via_speedup(
    a: float,
    b: float,
    e: float,
    kappa_b: float,
    kappa_c: float,
    gamma: int,
    c: float,
    c_s: float,
) -> float:
    """S_VIA = E[N] / (γc + c_s + 1 - P_noq); equals S_SD for a=b=0, e=1, c_s=0."""
    return via_block_model(a, b, e, kappa_b, kappa_c, gamma, c, c_s).speedup


def via_upper_bound(gamma: int, c: float, c_s: float) -> float:
    """(γ+1)/(γc + c_s): every token accepted in tier A and q never runs."""
    return (_gamma(gamma) + 1) / (gamma * _cost("c", c) + _cost("c_s", c_s))


def via_vs_sd_block_cost(p_no_target: float, gamma: int, c: float, c_s: float) -> float:
    """VIA-SD's expected cost per block relative to standard SD's, same drafter and γ:
    (γc + c_s + 1 - P_noq) / (γc + 1).

    Below 1 exactly when c_s < P_noq: the slim pass, paid in every block, must cost less than
    the share of blocks in which it spares the target's forward. Both methods emit about the
    same tokens per block (VIA's greedy output tracks q's), so this is also the wall-clock
    ratio a cost model predicts."""
    p = _prob("p_no_target", p_no_target)
    g = _gamma(gamma)
    c, c_s = _cost("c", c), _cost("c_s", c_s)
    return (g * c + c_s + 1.0 - p) / (g * c + 1.0)


def modelled_latency(calls: int, tokens: int, t_one: float, t_many: float, many: int) -> float:
    """Modelled latency of one model: ``calls`` forwards that processed ``tokens``
    input tokens in all, each costing ``t_one`` for one token plus the measured marginal cost
    (t_many - t_one)/(many - 1) for every further token (linear between the two micro-
    benchmarks at 1 and ``many`` query tokens)."""
    if calls < 0 or tokens < 0:
        raise ViaSDConfigError(f"calls and tokens must be >= 0, got {calls}, {tokens}")
    if many < 2:
        raise ViaSDConfigError(f"need latencies at 1 and at >= 2 tokens, got many={many}")
    slope = max(t_many - t_one, 0.0) / (many - 1)
    return calls * t_one + max(tokens - calls, 0) * slope
