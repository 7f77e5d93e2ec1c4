"""EDL curves: one point per checkpoint n, serialised as the ``curve.json`` format."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class EDLPoint:
    """Quantities at one checkpoint n (bits; per-example values say so).

    ``edl_bits = mdl_bits - n * test_bits_per_example`` (never clipped: finite samples and
    damaging learners can make it negative)."""

    n: int
    mdl_bits: float
    test_bits_per_example: float
    edl_bits: float
    base_test_bits_per_example: float
    zero_shot_code_bits: float
    compression: float
    loss_gap_closed: float
    accuracy: float | None = None
    accuracy_base: float | None = None


@dataclass
class EDLCurve:
    """The curve of one (task, method) run, with the learner's bookkeeping."""

    points: list[EDLPoint]
    method: str
    mode: str
    trainable_params: int
    config: dict[str, Any]
    per_example_bits: list[float] | None = None
    block_boundaries: list[int] | None = None
    block_bits: list[float] | None = None
    timings: dict[str, float] = field(default_factory=dict)
    task: str | None = None
    control: EDLCurve | None = None

    def point(self, n: int) -> EDLPoint:
        """The point at checkpoint ``n`` (KeyError if not a checkpoint)."""
        for p in self.points:
            if p.n == n:
                return p
        raise KeyError(f"n={n} is not a checkpoint of this curve ({[p.n for p in self.points]})")

    @property
    def ns(self) -> list[int]:
        return [p.n for p in self.points]

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "method": self.method,
            "mode": self.mode,
            "trainable_params": self.trainable_params,
            "config": self.config,
            "points": [asdict(p) for p in self.points],
            "timings": self.timings,
        }
        if self.task is not None:
            d["task"] = self.task
        for k in ("per_example_bits", "block_boundaries", "block_bits"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        if self.control is not None:
            d["control"] = self.control.to_dict()
        return d

    def to_json(self, *, timings: bool = True) -> str:
        """JSON text; ``timings=False`` drops wall-clock fields (for reproducibility checks)."""
        d = self.to_dict()
        if not timings:
            d.pop("timings")
            if "control" in d:
                d["control"].pop("timings", None)
        return json.dumps(d, sort_keys=True, default=_nan_safe)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EDLCurve:
        ctrl = d.get("control")
        return cls(
            points=[EDLPoint(**p) for p in d["points"]],
            method=d["method"],
            mode=d["mode"],
            trainable_params=int(d["trainable_params"]),
            config=d.get("config", {}),
            per_example_bits=d.get("per_example_bits"),
            block_boundaries=d.get("block_boundaries"),
            block_bits=d.get("block_bits"),
            timings=d.get("timings", {}),
            task=d.get("task"),
            control=cls.from_dict(ctrl) if ctrl else None,
        )

    @classmethod
    def from_json(cls, text: str) -> EDLCurve:
        return cls.from_dict(json.loads(text))


def _nan_safe(o: Any) -> Any:  # pragma: no cover - json calls it only for unknown types
    if isinstance(o, float) and math.isnan(o):
        return None
    return str(o)
