"""The calibrator (section 2.3): diff-in-means calibration vectors per layer, the adaptive
strength ``alpha_t`` and the trigger/release rule with hysteresis."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import numpy as np

from monica_syco.errors import MonicaConfigError, MonicaError
from monica_syco.items import jsonable
from monica_syco.monitor import check_against_model

MODES = ("add", "clamp", "logit")
SCOPES = ("until_release", "next_step")


class Calibrator:
    """Monitor-guided calibration (section 2.3).

    ``mode="add"``: ``h <- h - alpha_t v_l``; ``"clamp"``: the projection on ``v_l/|v_l|`` is
    clamped to the honest mean ``m_hon^l``; ``"logit"``: the first tokens of the cued answer
    lose ``beta (SDS - tau)/(1 - tau)`` logits. Trigger at ``SDS > threshold``; release at
    ``SDS < threshold - release_gap`` (``scope="until_release"``) or after one step
    (``"next_step"``). ``alpha_t = alpha_min + (alpha_max - alpha_min) clip((SDS - tau) /
    (1 - tau), 0, 1)``, in units of ``|v_l|``."""

    def __init__(
        self,
        vectors: dict[int, Any],
        mode: Literal["add", "clamp", "logit"] = "add",
        threshold: float = 0.5,
        release_gap: float = 0.1,
        alpha_min: float = 0.5,
        alpha_max: float = 2.0,
        scope: Literal["until_release", "next_step"] = "until_release",
        apply_to_answer: bool = True,
        logit_beta: float = 5.0,
        honest_means: dict[int, float] | None = None,
        *,
        hidden_size: int | None = None,
        model_fingerprint: str = "",
        metrics: dict[str, Any] | None = None,
    ) -> None:
        if mode not in MODES:
            raise MonicaConfigError(f"mode must be one of {MODES}, got {mode!r}")
        if scope not in SCOPES:
            raise MonicaConfigError(f"scope must be one of {SCOPES}, got {scope!r}")
        if not 0.0 <= threshold <= 1.0:
            raise MonicaConfigError(f"threshold must be in [0, 1], got {threshold}")
        if release_gap < 0:
            raise MonicaConfigError(f"release_gap must be >= 0, got {release_gap}")
        if alpha_min < 0 or alpha_max < 0:
            raise MonicaConfigError(
                f"alphas must be >= 0, got alpha_min={alpha_min}, alpha_max={alpha_max}"
            )
        if alpha_min > alpha_max:
            raise MonicaConfigError(f"alpha_min={alpha_min} > alpha_max={alpha_max}")
        if logit_beta < 0:
            raise MonicaConfigError(f"logit_beta must be >= 0, got {logit_beta}")
        if not vectors:
            raise MonicaConfigError("vectors must not be empty")
        self.vectors = {int(k): np.asarray(_np(v), dtype=np.float64) for k, v in vectors.items()}
        dims = {v.shape for v in self.vectors.values()}
        if len(dims) != 1 or len(next(iter(dims))) != 1:
            raise MonicaConfigError(f"vectors must all be 1-D of one size, got {sorted(dims)}")
        if mode == "clamp" and not honest_means:
            raise MonicaConfigError("mode='clamp' needs honest_means (fit_calibrator gives them)")
        self.mode, self.scope = mode, scope
        self.threshold, self.release_gap = float(threshold), float(release_gap)
        self.alpha_min, self.alpha_max = float(alpha_min), float(alpha_max)
        self.apply_to_answer, self.logit_beta = apply_to_answer, float(logit_beta)
        self.honest_means = {int(k): float(v) for k, v in (honest_means or {}).items()}
        self.hidden_size = int(hidden_size or next(iter(dims))[0])
        self.model_fingerprint = model_fingerprint
        self.metrics = dict(metrics or {})
        self._t: dict[tuple[int, str, str], Any] = {}

    @property
    def layers(self) -> list[int]:
        return sorted(self.vectors)

    @property
    def release_threshold(self) -> float:
        return self.threshold - self.release_gap

    def strength(self, sds: float) -> float:
        """Normalised excess ``clip((SDS - tau)/(1 - tau), 0, 1)``."""
        if self.threshold >= 1.0:
            return 0.0
        return float(min(1.0, max(0.0, (sds - self.threshold) / (1.0 - self.threshold))))

    def alpha(self, sds: float) -> float:
        """Adaptive strength ``alpha_t`` (section 2.3)."""
        return self.alpha_min + (self.alpha_max - self.alpha_min) * self.strength(sds)

    def update(self, active: bool, sds: float) -> bool:
        """Trigger/release rule at a step boundary: the new active flag."""
        if self.scope == "next_step":
            return sds > self.threshold
        if not active:
            return sds > self.threshold
        return not sds < self.release_threshold

    def with_(self, **kw: Any) -> Calibrator:
        """A copy with some settings replaced (e.g. ``alpha_max``)."""
        args = dict(
            vectors=self.vectors,
            mode=self.mode,
            threshold=self.threshold,
            release_gap=self.release_gap,
            alpha_min=self.alpha_min,
            alpha_max=self.alpha_max,
            scope=self.scope,
            apply_to_answer=self.apply_to_answer,
            logit_beta=self.logit_beta,
            honest_means=self.honest_means,
            hidden_size=self.hidden_size,
            model_fingerprint=self.model_fingerprint,
            metrics=self.metrics,
        )
        args.update(kw)
        if args["alpha_min"] > args["alpha_max"] and "alpha_min" not in kw:
            args["alpha_min"] = args["alpha_max"]
        return Calibrator(**args)

    def tensors(self, layer: int, device: Any, dtype: Any) -> tuple[Any, Any, float]:
        """``(v_l, v_l/|v_l|, m_hon^l)`` as torch tensors on ``device``."""
        import torch

        key = (layer, str(device), str(dtype))
        if key not in self._t:
            v = torch.as_tensor(self.vectors[layer], dtype=dtype, device=device)
            n = v.norm()
            unit = v / n if float(n) > 0 else v
            self._t[key] = (v, unit, self.honest_means.get(layer, 0.0))
        return self._t[key]

    def save(self, path: str | Path) -> None:
        """``calibrator.safetensors`` (``vector.{l}``, ``honest_mean.{l}``) + ``calibrator.json``."""
        from safetensors.numpy import save_file

        from llmcore.data import atomic_write_json

        p = Path(path)
        p.mkdir(parents=True, exist_ok=True)
        t = {f"vector.{k}": np.ascontiguousarray(v) for k, v in self.vectors.items()}
        t |= {
            f"honest_mean.{k}": np.asarray(v, dtype=np.float64)
            for k, v in self.honest_means.items()
        }
        save_file(t, str(p / "calibrator.safetensors"))
        atomic_write_json(
            p / "calibrator.json",
            {
                "layers": self.layers,
                "mode": self.mode,
                "threshold": self.threshold,
                "release_gap": self.release_gap,
                "alpha_min": self.alpha_min,
                "alpha_max": self.alpha_max,
                "scope": self.scope,
                "apply_to_answer": self.apply_to_answer,
                "logit_beta": self.logit_beta,
                "hidden_size": self.hidden_size,
                "model_fingerprint": self.model_fingerprint,
                "metrics": jsonable(self.metrics),
            },
        )

    @classmethod
    def load(cls, path: str | Path, **overrides: Any) -> Calibrator:
        """Load a saved calibrator; ``overrides`` replace saved settings (e.g. ``mode``)."""
        from safetensors.numpy import load_file

        p = Path(path)
        if not (p / "calibrator.json").exists():
            raise MonicaError(f"{p} has no calibrator.json; write one with `monica-syco fit`")
        meta = json.loads((p / "calibrator.json").read_text())
        t = load_file(str(p / "calibrator.safetensors"))
        layers = meta.pop("layers")
        args = {k: v for k, v in meta.items()}
        args.update({k: v for k, v in overrides.items() if v is not None})
        return cls(
            {x: t[f"vector.{x}"] for x in layers},
            honest_means={
                x: float(t[f"honest_mean.{x}"]) for x in layers if f"honest_mean.{x}" in t
            },
            **args,
        )

    def check_model(self, model: Any, n_layers: int, *, strict: bool = True) -> None:
        check_against_model(
            "the calibrator",
            self.layers,
            self.hidden_size,
            self.model_fingerprint,
            model,
            n_layers,
            strict=strict,
        )


def _np(v: Any) -> np.ndarray:
    if hasattr(v, "detach"):
        return v.detach().cpu().double().numpy()
    return np.asarray(v)
