"""Per-layer step probes of the drift score (section 2.2, item 3): standardised L2 logistic
regression (scikit-learn when installed, an equivalent torch L-BFGS fit otherwise) and the
diff-in-means probe. Both end as ``p = sigmoid(w . (x - mean) / scale + b)``."""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

import numpy as np

from monica_syco.errors import MonicaConfigError, MonicaDataError, NotFittedError


@runtime_checkable
class Probe(Protocol):
    """A binary probe on step representations: ``predict_proba`` gives p(sycophantic)."""

    def fit(self, X: np.ndarray, y: np.ndarray) -> Probe: ...

    def predict_proba(self, X: np.ndarray) -> np.ndarray: ...


def check_xy(
    X: np.ndarray, y: np.ndarray, min_per_class: int = 10
) -> tuple[np.ndarray, np.ndarray]:
    """Validate training data: 2-D finite states, binary labels, both classes present."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y).astype(np.int64).ravel()
    if X.ndim != 2 or len(X) != len(y):
        raise MonicaDataError(f"X must be [N, d] with N = len(y); got {X.shape} and {y.shape}")
    if not np.isfinite(X).all():
        bad = int((~np.isfinite(X)).any(1).sum())
        raise MonicaDataError(f"{bad} step states contain NaN or inf; drop them before fitting")
    if not set(np.unique(y).tolist()) <= {0, 1}:
        raise MonicaDataError(f"labels must be 0/1, got {sorted(set(y.tolist()))[:5]}")
    n1, n0 = int(y.sum()), int(len(y) - y.sum())
    if n0 == 0 or n1 == 0:
        raise MonicaDataError(
            f"step labels have one class only ({n0} honest, {n1} sycophantic); collect more "
            "trajectories (more samples per prompt, T=1.0) so both behaviours occur"
        )
    if min(n0, n1) < min_per_class:
        raise MonicaDataError(
            f"need >= {min_per_class} steps per class, got {n0} honest and {n1} sycophantic"
        )
    return X, y


class _LinearProbe:
    weight: np.ndarray | None = None
    bias: float = 0.0
    mean: np.ndarray | None = None
    scale: np.ndarray | None = None

    def _params(self) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
        if self.weight is None or self.mean is None or self.scale is None:
            raise NotFittedError(f"{type(self).__name__} is not fitted; call fit(X, y) first")
        return self.weight, self.bias, self.mean, self.scale

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        w, b, m, s = self._params()
        X = np.asarray(X, dtype=np.float64)
        return ((X - m) / s) @ w + b

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """p(sycophantic) per row, in [0, 1]."""
        return 1.0 / (1.0 + np.exp(-np.clip(self.decision_function(X), -500, 500)))

    def state(self) -> dict[str, np.ndarray]:
        w, b, m, s = self._params()
        return {"weight": w, "bias": np.asarray(b), "mean": m, "scale": s}

    @classmethod
    def from_state(cls, st: dict[str, np.ndarray]) -> _LinearProbe:
        p = cls()
        p.weight = np.asarray(st["weight"], dtype=np.float64)
        p.bias = float(np.asarray(st["bias"]).reshape(-1)[0])
        p.mean = np.asarray(st["mean"], dtype=np.float64)
        p.scale = np.asarray(st["scale"], dtype=np.float64)
        return p


class LogisticProbe(_LinearProbe):
    """L2 logistic regression on standardised states (``C`` as in scikit-learn: the loss is
    ``sum(logloss) + ||w||^2 / (2C)``). ``backend="auto"`` uses scikit-learn when installed
    (extra ``sklearn``) and the torch L-BFGS fit of the same objective otherwise."""

    kind = "logistic"

    def __init__(
        self,
        C: float = 1.0,
        max_iter: int = 1000,
        standardize: bool = True,
        backend: Literal["auto", "sklearn", "torch"] = "auto",
    ) -> None:
        if C <= 0:
            raise MonicaConfigError(f"C must be > 0, got {C}")
        if backend not in ("auto", "sklearn", "torch"):
            raise MonicaConfigError(f"backend must be auto|sklearn|torch, got {backend!r}")
        self.C, self.max_iter, self.standardize, self.backend = C, max_iter, standardize, backend
        self.fitted_with = ""

    def fit(self, X: np.ndarray, y: np.ndarray) -> LogisticProbe:
        X, y = check_xy(X, y)
        mean = X.mean(0) if self.standardize else np.zeros(X.shape[1])
        scale = X.std(0) if self.standardize else np.ones(X.shape[1])
        scale = np.where(scale < 1e-8, 1.0, scale)
        Z = (X - mean) / scale
        use_sk = self.backend == "sklearn"
        if self.backend == "auto":
            try:
                import sklearn  # noqa: F401

                use_sk = True
            except ImportError:
                use_sk = False
        if use_sk:
            try:
                from sklearn.linear_model import LogisticRegression
            except ImportError as e:
                from llmcore.errors import MissingExtraError

                raise MissingExtraError(
                    "LogisticProbe(backend='sklearn') (or use backend='torch')",
                    "sklearn",
                    package="monica-syco",
                ) from e
            clf = LogisticRegression(C=self.C, max_iter=self.max_iter).fit(Z, y)
            w, b = clf.coef_[0].astype(np.float64), float(clf.intercept_[0])
            self.fitted_with = "sklearn"
        else:
            w, b = _torch_logistic(Z, y, self.C, self.max_iter)
            self.fitted_with = "torch"
        self.weight, self.bias, self.mean, self.scale = w, b, mean, scale
        return self


def _torch_logistic(
    Z: np.ndarray, y: np.ndarray, C: float, max_iter: int
) -> tuple[np.ndarray, float]:
    import torch

    Zt = torch.as_tensor(Z, dtype=torch.float64)
    yt = torch.as_tensor(y, dtype=torch.float64)
    w = torch.zeros(Z.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS(
        [w, b],
        lr=1.0,
        max_iter=max_iter,
        tolerance_grad=1e-10,
        tolerance_change=1e-12,
        line_search_fn="strong_wolfe",
    )

    def closure() -> torch.Tensor:
        opt.zero_grad()
        logits = Zt @ w + b
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, yt, reduction="sum")
        loss = loss + (w * w).sum() / (2 * C)
        loss.backward()
        return loss

    opt.step(closure)
    return w.detach().numpy().copy(), float(b.detach())


class DiffMeanProbe(_LinearProbe):
    """``p = sigmoid((<x, v> - m) / tau)``: ``v`` the unit diff-in-means direction, ``m`` the
    midpoint of the two class-mean projections, ``tau`` their pooled standard deviation."""

    kind = "diffmean"

    def fit(self, X: np.ndarray, y: np.ndarray) -> DiffMeanProbe:
        X, y = check_xy(X, y)
        diff = X[y == 1].mean(0) - X[y == 0].mean(0)
        norm = float(np.linalg.norm(diff))
        if norm == 0:
            raise MonicaDataError("the two classes have the same mean state; no direction")
        v = diff / norm
        proj = X @ v
        p1, p0 = proj[y == 1], proj[y == 0]
        m = 0.5 * (p1.mean() + p0.mean())
        tau = float(np.sqrt(0.5 * (p1.var() + p0.var())))
        tau = tau if tau > 1e-12 else 1e-12
        self.weight, self.bias = v / tau, -m / tau
        self.mean, self.scale = np.zeros_like(v), np.ones_like(v)
        return self


def make_probe(kind: str, **kw: object) -> _LinearProbe:
    """``"logistic"`` or ``"diffmean"``."""
    if kind == "logistic":
        return LogisticProbe(**kw)  # type: ignore[arg-type]
    if kind == "diffmean":
        return DiffMeanProbe()
    raise MonicaConfigError(f"probe must be 'logistic' or 'diffmean', got {kind!r}")


def auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (ties count one half); NaN with one class."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels).astype(bool)
    n1, n0 = int(y.sum()), int((~y).sum())
    if n1 == 0 or n0 == 0:
        return float("nan")
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s))
    sorted_s = s[order]
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and sorted_s[j + 1] == sorted_s[i]:
            j += 1
        ranks[order[i : j + 1]] = 0.5 * (i + j) + 1
        i = j + 1
    return float((ranks[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))
