"""Conformal p-values, estimators of the non-member share and (scaled) Benjamini-Hochberg.

Every function takes 1-D arrays (one experiment) or ``(n_exp, .)`` matrices (one experiment per
row, all steps row-wise) and returns numpy arrays. Scores are oriented larger = more
member-like; a p-value is small when a test point scores higher than most calibration
non-members.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ptdi.errors import PTDIConfigError, PTDIInputError

PI_ESTIMATORS = ("jkbb", "jkbb_auto", "storey", "bh", "oracle")
"""Names accepted by :func:`estimate_pi0` and :func:`ptdi_select`."""

JKBB_AUTO_GAMMAS = (
    0.01, 0.05, 0.1, 0.2, 0.5, 0.6, 0.8, 1.2, 1.5, 2.0, 2.5,
    3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
)  # fmt: skip
"""The bandwidth-ratio grid of the stability-selected JKBB variant."""

Ties = Literal["conservative", "randomized"]


# --------------------------------------------------------------------------- validation
def check_alpha(alpha: float | Sequence[float] | np.ndarray) -> np.ndarray:
    """``alpha`` as a 1-D float array with every entry in (0, 1)."""
    a = np.atleast_1d(np.asarray(alpha, dtype=float))
    if a.ndim != 1 or a.size == 0:
        raise PTDIConfigError(f"alpha must be a number or a 1-D list of numbers, got {alpha!r}")
    bad = a[~((a > 0) & (a < 1))]
    if bad.size:
        raise PTDIConfigError(
            f"alpha must lie in (0, 1), got {bad.tolist()}; use a target level such as 0.1"
        )
    return a


def min_calibration_size(alpha: float) -> int:
    """Smallest n with n + 1 >= 1/alpha (below it the smallest p-value 1/(n+1) exceeds alpha)."""
    return max(1, math.ceil(1.0 / alpha - 1.0 - 1e-9))


def check_calibration_size(n: int, alpha: np.ndarray) -> None:
    """Refuse a calibration set too small for any selection at the smallest requested level."""
    a = float(np.min(alpha))
    need = min_calibration_size(a)
    if n < need:
        raise PTDIInputError(
            f"calibration set of n={n} non-members is too small for alpha={a:g}: the smallest "
            f"conformal p-value is 1/(n+1)={1 / (n + 1):.4g} > alpha, so nothing can be "
            f"selected; use at least n={need} calibration non-members (n + 1 >= 1/alpha)"
        )


def _finite(x: np.ndarray, what: str, ids: Sequence[Any] | None = None) -> None:
    bad = ~np.isfinite(x)
    if bad.any():
        idx = np.argwhere(bad)
        if ids is not None and x.ndim == 1:
            named = [ids[int(i)] for i in idx[:10, 0]]
        else:
            named = [
                tuple(int(v) for v in row) if len(row) > 1 else int(row[0]) for row in idx[:10]
            ]
        more = f" (and {len(idx) - 10} more)" if len(idx) > 10 else ""
        raise PTDIInputError(
            f"{what} hold {len(idx)} NaN or infinite value(s) at {named}{more}; drop or rescore "
            "those rows"
        )


def _as_float(x: Any, what: str) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim not in (1, 2):
        raise PTDIInputError(f"{what} must be 1-D or (n_exp, n), got shape {a.shape}")
    if a.shape[-1] == 0:
        raise PTDIInputError(f"{what} are empty; provide at least one row")
    return a


def _check_pvalues(p: Any) -> np.ndarray:
    a = _as_float(p, "p-values")
    _finite(a, "p-values")
    if (a < 0).any() or (a > 1).any():
        raise PTDIInputError("p-values must lie in [0, 1]")
    return a


# --------------------------------------------------------------------------- p-values
def conformal_pvalues(
    cal_scores: Any,
    test_scores: Any,
    higher_is_member: bool = True,
    ties: Ties = "conservative",
    rng: np.random.Generator | int | None = None,
    clip: float = 1e-10,
) -> np.ndarray:
    """Conformal p-values of test points against calibration non-members (Sec. 2.3).

    ``p_j = (1 + #{i : s(z_i) >= s(x_j)}) / (n + 1)`` (conservative), or with randomised ties
    ``(#{s(z_i) > s(x_j)} + U_j (1 + #{s(z_i) = s(x_j)})) / (n + 1)``; clipped to
    ``[clip, 1 - clip]`` (``clip=0`` keeps the exact grid). ``cal_scores`` is ``(n,)`` or
    ``(n_exp, n)``, ``test_scores`` ``(m,)`` or ``(n_exp, m)``; a 1-D side is shared by all rows.
    Under exchangeability of calibration and test non-members, null p-values are
    super-uniform.
    """
    if ties not in ("conservative", "randomized"):
        raise PTDIConfigError(f"ties must be 'conservative' or 'randomized', got {ties!r}")
    if not 0 <= clip < 0.5:
        raise PTDIConfigError(f"clip must lie in [0, 0.5), got {clip!r}")
    cal = _as_float(cal_scores, "calibration scores")
    test = _as_float(test_scores, "test scores")
    _finite(cal, "calibration scores")
    _finite(test, "test scores")
    if not higher_is_member:
        cal, test = -cal, -test
    n = cal.shape[-1]
    squeeze = cal.ndim == 1 and test.ndim == 1
    n_exp = max(cal.shape[0] if cal.ndim == 2 else 1, test.shape[0] if test.ndim == 2 else 1)
    cal2 = np.broadcast_to(cal if cal.ndim == 2 else cal[None], (n_exp, n))
    test2 = np.broadcast_to(test if test.ndim == 2 else test[None], (n_exp, test.shape[-1]))
    cal_sorted = np.sort(cal2, axis=1)
    below = np.empty(test2.shape, dtype=np.int64)  # #{cal < t}
    upto = np.empty(test2.shape, dtype=np.int64) if ties == "randomized" else None
    shared = cal.ndim == 1
    for r in range(n_exp):
        row = cal_sorted[0 if shared else r]
        below[r] = np.searchsorted(row, test2[r], side="left")
        if upto is not None:
            upto[r] = np.searchsorted(row, test2[r], side="right")
    if upto is None:
        p = (1.0 + (n - below)) / (n + 1.0)
    else:
        gen = np.random.default_rng(rng)
        u = gen.random(test2.shape)
        greater = n - upto
        equal = upto - below
        p = (greater + u * (1.0 + equal)) / (n + 1.0)
    if clip > 0:
        p = np.clip(p, clip, 1.0 - clip)
    return p[0] if squeeze else p


# --------------------------------------------------------------------------- pi0 estimators
def jkbb_weights(gamma: float) -> tuple[float, float, float]:
    """Generalised-jackknife weights ``(w0, w1)`` and variance factor ``Omega(gamma)``.

    ``w1 = -1/(gamma - 1)``, ``w0 = 1 - w1`` cancel the first-order bias of the Beta boundary
    kernel across bandwidths ``h`` and ``gamma h`` (``w0 + w1 = 1``, ``w0 + gamma w1 = 0``);
    ``gamma <= 1`` is replaced by 1.1 as in the authors' estimator.
    """
    g = float(gamma)
    if g <= 1:
        g = 1.1
    w1 = -1.0 / (g - 1.0)
    w0 = 1.0 - w1
    omega = w0**2 / 2 + w1**2 / (2 * g) + 2 * w0 * w1 / (g + 1)
    return w0, w1, omega


def beta_kernel(p: np.ndarray, b: np.ndarray | float) -> np.ndarray:
    """Beta boundary kernel at 1: the Beta(a, 1) density ``a p^(a-1)``, ``a = 1/b + 1``."""
    a = 1.0 / np.asarray(b, dtype=float) + 1.0
    with np.errstate(divide="ignore"):
        return np.exp(np.log(a) + (a - 1.0) * np.log(p))


def _check_gamma(gamma: float) -> float:
    if not (np.isfinite(gamma) and gamma > 0):
        raise PTDIConfigError(f"jkbb gamma must be > 0, got {gamma!r} (the default is 3.0)")
    return float(gamma)


def _check_z(z: float) -> float:
    if not (np.isfinite(z) and z >= 0):
        raise PTDIConfigError(
            f"jkbb z must be >= 0, got {z!r} (0 = the unmargined estimator, default 1.0)"
        )
    return float(z)


def jkbb_pi0(pvalues: Any, gamma: float = 3.0, z: float = 1.0, return_details: bool = False) -> Any:
    """Jackknife-corrected Beta boundary (JKBB) estimate of the non-member share pi0.

    The p-value density at 1 is ``f(1) = pi0 + pi f1(1) >= pi0``. Steps (row-wise): a Beta(c, 1)
    slope ``c`` fitted by maximum likelihood, the MSE-optimal bandwidth ``h``, Beta boundary
    kernel estimates of ``f(1)`` at ``h`` and ``gamma h``, their jackknife combination
    ``w0 f_h + w1 f_gh`` clipped to [0, 1], then an upper confidence margin ``z`` standard errors
    of the per-point combined kernel values (``z = 0`` is the plain JKBB estimate). Returns a
    float for 1-D input, an ``(n_exp,)`` array for a matrix; with ``return_details`` also a dict
    of ``c``, ``h``, ``f_h``, ``f_gh``, ``se``, ``pi0_raw``.
    """
    gamma = _check_gamma(gamma)
    z = _check_z(z)
    p = _check_pvalues(pvalues)
    squeeze = p.ndim == 1
    p2 = p[None] if squeeze else p
    m = p2.shape[1]
    w0, w1, omega = jkbb_weights(gamma)
    g = 1.1 if gamma <= 1 else gamma
    with np.errstate(divide="ignore"):
        logp = np.log(p2)
    c = -m / (logp.sum(axis=1) - 1e-15)
    c = np.where((c > 0.95) & (c < 1.05), 1.05, c)
    c = np.maximum(c, 0.1)
    h = (omega / (4 * m * c * (c - 1) ** 4 * g**2 + 1e-12)) ** 0.2
    h = np.clip(h, 0.001, 0.8 / g)
    a_h = 1.0 / h[:, None] + 1.0
    a_gh = 1.0 / (g * h)[:, None] + 1.0
    k_h = np.exp(np.log(a_h) + (a_h - 1.0) * logp)  # beta_kernel(p, h), reusing log p
    k_gh = np.exp(np.log(a_gh) + (a_gh - 1.0) * logp)
    f_h = k_h.mean(axis=1)
    f_gh = k_gh.mean(axis=1)
    raw = w0 * f_h + w1 * f_gh
    pi0 = np.clip(raw, 0.0, 1.0)
    se = (w0 * k_h + w1 * k_gh).std(axis=1, ddof=1) / math.sqrt(m) if m > 1 else np.zeros_like(pi0)
    out = np.clip(pi0 + z * se, 0.0, 1.0)
    res: Any = float(out[0]) if squeeze else out
    if not return_details:
        return res
    det = {"c": c, "h": h, "f_h": f_h, "f_gh": f_gh, "se": se, "pi0_raw": raw}
    if squeeze:
        det = {k: float(v[0]) for k, v in det.items()}
    return res, det


def jkbb_auto_pi0(
    pvalues: Any,
    gamma_grid: Sequence[float] = JKBB_AUTO_GAMMAS,
    n_boot: int = 50,
    stability_lambda: float = 1.0,
    rng: np.random.Generator | int | None = None,
) -> Any:
    """Stability-selected JKBB (the authors' evaluation wrapper; report only).

    For each bandwidth ratio ``g`` in the grid, JKBB (``z = 0``) on ``n_boot`` bootstrap
    resamples gives a mean and sd; ``g*`` minimises ``mean_g + lambda * signal * penalty_g`` with
    ``signal = clip(2 (0.5 - mean p), 0.1, 1)`` and ``penalty_g = sqrt(sd_g / (max sd - min sd +
    1e-6))``; the estimate is ``clip(mean_{g*}, 0.05, 1)``. It was anti-conservative in our
    simulations (FIR above the target level), so it is not the default.
    """
    if n_boot < 2:
        raise PTDIConfigError(f"n_boot must be >= 2, got {n_boot}")
    for g in gamma_grid:
        _check_gamma(g)
    p = _check_pvalues(pvalues)
    squeeze = p.ndim == 1
    p2 = p[None] if squeeze else p
    gen = np.random.default_rng(rng)
    m = p2.shape[1]
    out = np.empty(p2.shape[0])
    for r in range(p2.shape[0]):
        boot = p2[r][gen.integers(0, m, size=(n_boot, m))]
        est = np.stack([jkbb_pi0(boot, gamma=g, z=0.0) for g in gamma_grid])  # (G, B)
        mean_g = est.mean(axis=1)
        sd_g = est.std(axis=1, ddof=1)
        signal = float(np.clip(2 * (0.5 - p2[r].mean()), 0.1, 1.0))
        penalty = np.sqrt(sd_g / (sd_g.max() - sd_g.min() + 1e-6))
        best = int(np.argmin(mean_g + stability_lambda * signal * penalty))
        out[r] = np.clip(mean_g[best], 0.05, 1.0)
    return float(out[0]) if squeeze else out


def storey_pi0(pvalues: Any, lam: float = 0.5) -> Any:
    """Storey's estimator ``min(1, (1 + #{p > lam}) / (m (1 - lam)))`` (adaptive BH)."""
    if not (np.isfinite(lam) and 0 < lam < 1):
        raise PTDIConfigError(f"storey lambda must lie in (0, 1), got {lam!r} (default 0.5)")
    p = _check_pvalues(pvalues)
    m = p.shape[-1]
    est = np.minimum(1.0, (1.0 + (p > lam).sum(axis=-1)) / (m * (1.0 - lam)))
    return float(est) if p.ndim == 1 else est


def estimate_pi0(
    pvalues: Any,
    method: str = "jkbb",
    *,
    labels: Any = None,
    gamma: float = 3.0,
    z: float = 1.0,
    lam: float = 0.5,
    rng: np.random.Generator | int | None = None,
) -> Any:
    """pi0 by name: ``jkbb`` (default), ``jkbb_auto``, ``storey``, ``bh`` (1) or ``oracle``
    (the true non-member share from ``labels``, 1 = member; simulations only)."""
    p = _check_pvalues(pvalues)
    if method == "jkbb":
        return jkbb_pi0(p, gamma=gamma, z=z)
    if method == "jkbb_auto":
        return jkbb_auto_pi0(p, rng=rng)
    if method == "storey":
        return storey_pi0(p, lam=lam)
    if method == "bh":
        return 1.0 if p.ndim == 1 else np.ones(p.shape[0])
    if method == "oracle":
        if labels is None:
            raise PTDIConfigError("pi_estimator='oracle' needs labels (1 = member)")
        lab = np.broadcast_to(np.asarray(labels), p.shape)
        est = 1.0 - lab.mean(axis=-1)
        return float(est) if p.ndim == 1 else est
    raise PTDIConfigError(f"unknown pi_estimator {method!r}; choose one of {PI_ESTIMATORS}")


# --------------------------------------------------------------------------- BH
def bh_select(pvalues: Any, alpha: Any, scale: Any = 1.0) -> np.ndarray:
    """Benjamini-Hochberg on ``min(1, scale * p)`` (Sec. 2.5).

    ``r* = max{r : p~_(r) <= alpha r / m}``, selected = ``p~ <= alpha r* / m``. ``scale`` is a
    scalar, one value per row or one per point. A scalar ``alpha`` returns a boolean array of
    ``pvalues``' shape; a vector returns ``(..., |alpha|, m)``.
    """
    sel, _ = _bh(pvalues, alpha, scale)
    return sel


def _bh(pvalues: Any, alpha: Any, scale: Any = 1.0) -> tuple[np.ndarray, np.ndarray]:
    scalar_alpha = np.ndim(alpha) == 0
    a = check_alpha(alpha)
    p = _check_pvalues(pvalues)
    squeeze = p.ndim == 1
    p2 = p[None] if squeeze else p
    s = np.asarray(scale, dtype=float)
    if s.ndim == 1 and not squeeze and s.shape[0] == p2.shape[0] and s.shape[0] != p2.shape[1]:
        s = s[:, None]
    q = np.minimum(1.0, s * p2)
    q = np.broadcast_to(q, p2.shape)
    m = q.shape[1]
    q_sorted = np.sort(q, axis=1)
    ecdf = np.arange(1, m + 1) / m
    crit = ecdf[None, None, :] * a[None, :, None]  # (1, A, m)
    ok = q_sorted[:, None, :] <= crit  # (E, A, m)
    any_ok = ok.any(axis=2)
    r_star = np.where(any_ok, m - np.argmax(ok[:, :, ::-1], axis=2), 0)  # (E, A)
    thr = np.where(r_star > 0, ecdf[np.maximum(r_star - 1, 0)] * a[None, :], 0.0)
    sel = (q[:, None, :] <= thr[:, :, None]) & (r_star[:, :, None] > 0)
    if scalar_alpha:
        sel, thr = sel[:, 0], thr[:, 0]
    if squeeze:
        sel, thr = sel[0], thr[0]
    return sel, thr


# --------------------------------------------------------------------------- metrics
def selection_metrics(selected: np.ndarray, labels: Any) -> dict[str, np.ndarray]:
    """FDP, Power, FPR, TPR and Accuracy of boolean selections against labels (1 = member),
    over the last axis (the authors' metric names; FDP's mean over experiments is the FIR)."""
    sel = np.asarray(selected, dtype=bool)
    lab = np.asarray(labels).astype(bool)
    if lab.ndim == sel.ndim - 1 and lab.ndim >= 2:
        lab = lab[..., None, :]  # (E, m) labels against (E, A, m) selections
    lab = np.broadcast_to(lab, sel.shape)
    tp = (sel & lab).sum(axis=-1)
    fp = (sel & ~lab).sum(axis=-1)
    n1 = lab.sum(axis=-1)
    n0 = (~lab).sum(axis=-1)
    r = sel.sum(axis=-1)
    tn = n0 - fp
    return {
        "FDP": fp / np.maximum(r, 1),
        "Power": tp / np.maximum(n1, 1),
        "FPR": fp / np.maximum(n0, 1),
        "TPR": tp / np.maximum(n1, 1),
        "Accuracy": (tp + tn) / sel.shape[-1],
    }


# --------------------------------------------------------------------------- PTDI selection
@dataclass
class PTDIResult:
    """Outcome of :func:`ptdi_select`.

    Shapes: ``m`` test points, ``E`` experiments (absent for 1-D input), ``A`` levels (absent
    for a scalar alpha): ``selected`` ``(E, A, m)``, ``pvalues``/``scaled_pvalues`` ``(E, m)``,
    ``pi0_hat`` ``(E,)``, ``threshold`` ``(E, A)``; ``fdp``/``power`` like ``threshold`` when
    labels were given.
    """

    selected: np.ndarray
    pvalues: np.ndarray
    scaled_pvalues: np.ndarray
    pi0_hat: Any
    pi_hat: Any
    threshold: Any
    n_cal: int
    m: int
    alpha: Any
    pi_estimator: str
    fdp: Any = None
    power: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


def ptdi_select(
    cal_scores: Any,
    test_scores: Any,
    alpha: Any = 0.1,
    pi_estimator: str = "jkbb",
    jkbb_gamma: float = 3.0,
    jkbb_z: float = 1.0,
    lam: float = 0.5,
    ties: Ties = "conservative",
    labels: Any = None,
    rng: np.random.Generator | int | None = None,
) -> PTDIResult:
    """PTDI: conformal p-values, pi0 estimate, BH on ``min(1, pi0_hat p)`` (Sec. 2.3-2.5).

    The selection controls the false identification rate (expected share of non-members among
    the selected) at ``alpha`` when calibration and test non-members are exchangeable and the
    pi0 estimate is conservative; since ``pi0_hat <= 1`` it always contains plain BH's.
    """
    a = check_alpha(alpha)
    if pi_estimator not in PI_ESTIMATORS:
        raise PTDIConfigError(
            f"unknown pi_estimator {pi_estimator!r}; choose one of {PI_ESTIMATORS}"
        )
    _check_gamma(jkbb_gamma)
    _check_z(jkbb_z)
    if not (np.isfinite(lam) and 0 < lam < 1):
        raise PTDIConfigError(f"storey lambda must lie in (0, 1), got {lam!r} (default 0.5)")
    cal = _as_float(cal_scores, "calibration scores")
    n = cal.shape[-1]
    check_calibration_size(n, a)
    gen = np.random.default_rng(rng)
    p = conformal_pvalues(cal, test_scores, ties=ties, rng=gen)
    pi0 = estimate_pi0(p, pi_estimator, labels=labels, gamma=jkbb_gamma, z=jkbb_z, lam=lam, rng=gen)
    pi0_arr = np.asarray(pi0, dtype=float)
    scale = pi0_arr[..., None] if pi0_arr.ndim == 1 else pi0_arr
    scaled = np.minimum(1.0, scale * p)
    sel, thr = _bh(scaled, alpha)
    res = PTDIResult(
        selected=sel,
        pvalues=p,
        scaled_pvalues=scaled,
        pi0_hat=pi0,
        pi_hat=1.0 - pi0_arr if pi0_arr.ndim else 1.0 - float(pi0),
        threshold=thr,
        n_cal=n,
        m=p.shape[-1],
        alpha=alpha,
        pi_estimator=pi_estimator,
    )
    if labels is not None:
        lab = np.asarray(labels)
        if not np.isin(lab, (0, 1)).all():
            raise PTDIInputError("labels must be 0 (non-member) or 1 (member)")
        if np.ndim(alpha) > 0:
            lab = lab[..., None, :]
        met = selection_metrics(sel, lab)
        res.fdp, res.power = met["FDP"], met["Power"]
    return res


# --------------------------------------------------------------------------- protocol
def check_split_ratios(
    n_members: int,
    n_nonmembers: int,
    test_member_ratio: float,
    test_nonmember_ratio: float,
    cal_ratio: float,
) -> tuple[int, int, int]:
    """Sizes ``(n_test_members, n_test_nonmembers, n_cal)`` of the authors' split; refuses
    ratios outside (0, 1], non-member ratios summing above 1, or a split with an empty side."""
    for name, v in (
        ("test_member_ratio", test_member_ratio),
        ("test_nonmember_ratio", test_nonmember_ratio),
        ("cal_ratio", cal_ratio),
    ):
        if not (np.isfinite(v) and 0 < v <= 1):
            raise PTDIConfigError(f"{name} must lie in (0, 1], got {v!r}")
    if test_nonmember_ratio + cal_ratio > 1 + 1e-12:
        raise PTDIConfigError(
            f"test_nonmember_ratio + cal_ratio = {test_nonmember_ratio + cal_ratio:g} > 1: "
            "calibration and test non-members must be disjoint"
        )
    k1 = int(n_members * test_member_ratio)
    k0 = int(n_nonmembers * test_nonmember_ratio)
    kc = int(n_nonmembers * cal_ratio)
    for name, k, tot in (
        ("test members", k1, n_members),
        ("test non-members", k0, n_nonmembers),
        ("calibration non-members", kc, n_nonmembers),
    ):
        if k < 1:
            raise PTDIConfigError(
                f"the split leaves 0 {name} (from {tot} rows); raise the ratio or add data"
            )
    return k1, k0, kc


def split_protocol(
    member_scores: Any,
    nonmember_scores: Any,
    n_exp: int = 1000,
    test_member_ratio: float = 0.88,
    test_nonmember_ratio: float = 0.06,
    cal_ratio: float = 0.94,
    seed: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The authors' random-split protocol: per experiment, calibration = ``cal_ratio`` of the
    non-members, test = ``test_member_ratio`` of the members + ``test_nonmember_ratio`` of the
    remaining non-members. Returns ``(cal (E, n), test (E, m), labels (E, m))``."""
    mem = _as_float(member_scores, "member scores")
    non = _as_float(nonmember_scores, "non-member scores")
    if mem.ndim != 1 or non.ndim != 1:
        raise PTDIInputError("split_protocol takes 1-D member and non-member score arrays")
    _finite(mem, "member scores")
    _finite(non, "non-member scores")
    if n_exp < 1:
        raise PTDIConfigError(f"n_exp must be >= 1, got {n_exp}")
    k1, k0, kc = check_split_ratios(
        mem.size, non.size, test_member_ratio, test_nonmember_ratio, cal_ratio
    )
    gen = np.random.default_rng(seed)
    perm0 = np.argsort(gen.random((n_exp, non.size)), axis=1)
    perm1 = np.argsort(gen.random((n_exp, mem.size)), axis=1)
    cal = non[perm0[:, :kc]]
    test = np.concatenate([mem[perm1[:, :k1]], non[perm0[:, kc : kc + k0]]], axis=1)
    labels = np.concatenate([np.ones((n_exp, k1), int), np.zeros((n_exp, k0), int)], axis=1)
    return cal, test, labels


def evaluate(
    member_scores: Any,
    nonmember_scores: Any,
    alphas: Any = (0.1, 0.2, 0.3, 0.4, 0.5),
    pi_estimators: Sequence[str] = ("bh", "storey", "jkbb"),
    n_exp: int = 1000,
    test_member_ratio: float = 0.88,
    test_nonmember_ratio: float = 0.06,
    cal_ratio: float = 0.94,
    jkbb_gamma: float = 3.0,
    jkbb_z: float = 1.0,
    lam: float = 0.5,
    seed: int | None = 0,
) -> dict[str, Any]:
    """Mean FDP / Power / FPR / TPR / Accuracy per estimator and alpha over random splits.

    Returns ``{"alphas", "n_exp", "n_cal", "m", "pi_test", "results": {estimator: {"pi0_hat":
    mean, "FDP": [per alpha], "FDP_se": [...], "Power": [...], ...}}}``.
    """
    a = check_alpha(alphas)
    cal, test, labels = split_protocol(
        member_scores,
        nonmember_scores,
        n_exp=n_exp,
        test_member_ratio=test_member_ratio,
        test_nonmember_ratio=test_nonmember_ratio,
        cal_ratio=cal_ratio,
        seed=seed,
    )
    check_calibration_size(cal.shape[1], a)
    p = conformal_pvalues(cal, test)
    gen = np.random.default_rng(None if seed is None else seed + 1)
    out: dict[str, Any] = {
        "alphas": a.tolist(),
        "n_exp": n_exp,
        "n_cal": int(cal.shape[1]),
        "m": int(test.shape[1]),
        "pi_test": float(labels[0].mean()),
        "results": {},
    }
    for est in pi_estimators:
        pi0 = np.asarray(
            estimate_pi0(p, est, labels=labels, gamma=jkbb_gamma, z=jkbb_z, lam=lam, rng=gen)
        )
        sel = bh_select(p, a, scale=pi0)
        met = selection_metrics(sel, labels)
        row: dict[str, Any] = {"pi0_hat": float(pi0.mean())}
        for k, v in met.items():
            row[k] = v.mean(axis=0).tolist()
            row[f"{k}_se"] = (v.std(axis=0, ddof=1) / math.sqrt(n_exp)).tolist()
        out["results"][est] = row
    return out


# --------------------------------------------------------------------------- simulation
SIM_ESTIMATORS = ("bh", "storey", "jkbb", "jkbb_z0", "jkbb_auto", "oracle")


def simulate(
    n_cal: int,
    m: int,
    pi: float,
    member_shift: float,
    alpha: Any = 0.1,
    reps: int = 500,
    estimators: Sequence[str] = ("bh", "storey", "jkbb", "jkbb_z0"),
    seed: int = 0,
    jkbb_gamma: float = 3.0,
    jkbb_z: float = 1.0,
    lam: float = 0.5,
    return_reps: bool = False,
) -> dict[str, Any]:
    """Gaussian simulation: non-members N(0, 1), ``round(pi m)`` members N(member_shift, 1),
    ``n_cal`` calibration non-members; ``reps`` repetitions as ``(reps, m)`` matrices. All
    estimators see the same draws. ``jkbb`` uses ``jkbb_z``, ``jkbb_z0`` is the unmargined
    estimate. Returns per estimator the mean FIR and power per alpha with standard errors
    (and the per-repetition FDP and power with ``return_reps``)."""
    a = check_alpha(alpha)
    if not 0 <= pi <= 1:
        raise PTDIConfigError(f"pi must lie in [0, 1], got {pi!r}")
    if reps < 2 or m < 1:
        raise PTDIConfigError(f"reps must be >= 2 and m >= 1, got reps={reps}, m={m}")
    for e in estimators:
        if e not in SIM_ESTIMATORS:
            raise PTDIConfigError(f"unknown estimator {e!r}; choose from {SIM_ESTIMATORS}")
    check_calibration_size(n_cal, a)
    gen = np.random.default_rng(seed)
    m1 = round(pi * m)
    cal = gen.standard_normal((reps, n_cal))
    test = gen.standard_normal((reps, m))
    test[:, :m1] += member_shift
    labels = np.zeros((reps, m), dtype=int)
    labels[:, :m1] = 1
    p = conformal_pvalues(cal, test)
    out: dict[str, Any] = {
        "n_cal": n_cal,
        "m": m,
        "pi": pi,
        "member_shift": member_shift,
        "alphas": a.tolist(),
        "reps": reps,
        "seed": seed,
        "results": {},
    }
    for est in estimators:
        if est == "jkbb":
            pi0 = jkbb_pi0(p, gamma=jkbb_gamma, z=jkbb_z)
        elif est == "jkbb_z0":
            pi0 = jkbb_pi0(p, gamma=jkbb_gamma, z=0.0)
        else:
            pi0 = estimate_pi0(p, est, labels=labels, lam=lam, rng=gen)
        sel = bh_select(p, a, scale=np.asarray(pi0))  # (reps, A, m)
        met = selection_metrics(sel, labels)
        fdp, power = met["FDP"], met["Power"]  # (reps, A)
        row: dict[str, Any] = {
            "pi0_hat": float(np.mean(pi0)),
            "fir": fdp.mean(axis=0).tolist(),
            "fir_se": (fdp.std(axis=0, ddof=1) / math.sqrt(reps)).tolist(),
            "power": power.mean(axis=0).tolist(),
            "power_se": (power.std(axis=0, ddof=1) / math.sqrt(reps)).tolist(),
        }
        if return_reps:
            row["fdp_reps"] = fdp
            row["power_reps"] = power
        out["results"][est] = row
    return out
