"""Recorded trajectories: per-body, per-time-step physical quantities of one simulated scene.

The recorder of the paper (Sec. 3.2) logs, for every body and time step, position, velocity,
acceleration, momentum, energies and net force, and the tension of every string. A
:class:`Recording` holds those arrays and answers ``value("<entity>.<body>.<quantity>", t)``
at the nearest recorded time, reducing vectors to their Euclidean norm by default.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["BODY_QUANTITIES", "Recording"]

#: Quantities every body carries (vectors are [T, 3], scalars [T, 1]); ``displacement`` is
#: derived from ``position`` on demand.
BODY_QUANTITIES = (
    "position",
    "velocity",
    "acceleration",
    "momentum",
    "net_force",
    "kinetic_energy",
    "potential_energy_change",
)

_COMPONENTS = {"x": 0, "y": 1, "z": 2}


def _all_finite(a: np.ndarray) -> bool:
    """Whether every value of ``a`` is finite. For floats this is one BLAS dot of ``a`` with
    itself (NaN and Inf carry into the sum of squares); only a sum that overflows (values
    above about 1e154) sends the array to the element-wise test."""
    if a.dtype.kind == "f" and math.isfinite(np.vdot(a, a)):
        return True
    return bool(np.isfinite(a).all())


@dataclass
class Recording:
    """Time series of one simulation (``time[T]``, ``bodies[body][quantity] -> [T, d]``).

    ``bodies`` is keyed ``"<entity>.<body>"``; ``strings`` is keyed by tendon name with a
    ``"tension"`` series. ``unstable`` marks a run that produced NaN/Inf or overran its step
    budget (``reason`` says which); such recordings are never turned into questions.
    """

    time: np.ndarray
    bodies: dict[str, dict[str, np.ndarray]]
    strings: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    unstable: bool = False
    reason: str = ""
    families: dict[str, str] = field(default_factory=dict)
    """Entity name -> dynamics family it was simulated as."""

    @property
    def duration(self) -> float:
        return float(self.time[-1]) if len(self.time) else 0.0

    def attributes(self) -> list[str]:
        """Every attribute name :meth:`value` accepts."""
        out = []
        for body, qs in self.bodies.items():
            out += [f"{body}.{q}" for q in qs]
            if "position" in qs:
                out.append(f"{body}.displacement")
        for name, qs in self.strings.items():
            out += [f"{name}.{q}" for q in qs]
        return out

    def has(self, attribute: str) -> bool:
        try:
            self.series(attribute)
        except KeyError:
            return False
        return True

    def series(self, attribute: str) -> np.ndarray:
        """The ``[T, d]`` array of ``attribute`` (``KeyError`` naming close matches if unknown)."""
        head, _, quantity = attribute.rpartition(".")
        if head in self.bodies:
            qs = self.bodies[head]
            if quantity == "displacement" and "position" in qs:
                return qs["position"] - qs["position"][:1]
            if quantity in qs:
                return qs[quantity]
        if head in self.strings and quantity in self.strings[head]:
            return self.strings[head][quantity]
        import difflib

        close = difflib.get_close_matches(attribute, self.attributes(), n=3)
        raise KeyError(f"unknown attribute {attribute!r}; close matches: {close}")

    def index(self, t: float) -> int:
        """Nearest recorded index to time ``t`` (``ValueError`` outside [0, duration])."""
        if not np.isfinite(t) or t < -1e-12 or t > self.duration + 1e-9:
            raise ValueError(f"time t={t!r} is outside the recording [0, {self.duration:g}] s")
        return int(np.argmin(np.abs(self.time - t)))

    def value(self, attribute: str, t: float, component: str | int = "norm") -> float:
        """The recorded value of ``attribute`` at the time nearest ``t``.

        ``component`` is ``"norm"`` (Euclidean norm, the paper's reduction of vectors),
        ``"x"``/``"y"``/``"z"`` or an integer index.
        """
        arr = self.series(attribute)
        row = arr[self.index(t)]
        if component == "norm":
            return float(np.linalg.norm(row))
        idx = _COMPONENTS.get(component, component) if isinstance(component, str) else component
        if not isinstance(idx, int) or not 0 <= idx < row.shape[-1]:
            raise ValueError(
                f"component={component!r}: use 'norm', 'x', 'y', 'z' or 0..{row.shape[-1] - 1}"
            )
        return float(row[idx])

    def check_finite(self) -> Recording:
        """Mark the recording unstable (with a reason) if any array holds NaN or Inf.

        Arrays that are views of one buffer (as the analytic engine records a body) are
        checked through that buffer once; only a failing buffer is searched for the culprit.
        """
        checked: set[int] = set()
        last: object = checked  # the previous array's buffer (none yet)
        for group in (self.bodies, self.strings):
            for qs in group.values():
                for arr in qs.values():
                    base = arr.base
                    if base is last:
                        continue
                    if isinstance(base, np.ndarray):
                        last = base
                    else:
                        base = arr
                    if id(base) in checked:
                        continue
                    checked.add(id(base))
                    if not _all_finite(base):
                        return self._mark_first_non_finite()
        return self

    def _mark_first_non_finite(self) -> Recording:
        for group in (self.bodies, self.strings):
            for name, qs in group.items():
                for q, arr in qs.items():
                    if not np.all(np.isfinite(arr)):
                        self.unstable = True
                        self.reason = f"non-finite values in {name}.{q}"
                        return self
        return self

    def save(self, path: str | Path) -> Path:
        """Write a compressed ``.npz`` (arrays plus a JSON header)."""
        arrays: dict[str, np.ndarray] = {"time": self.time}
        for body, qs in self.bodies.items():
            for q, arr in qs.items():
                arrays[f"b|{body}|{q}"] = arr
        for name, qs in self.strings.items():
            for q, arr in qs.items():
                arrays[f"s|{name}|{q}"] = arr
        header = {"unstable": self.unstable, "reason": self.reason, "families": self.families}
        arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            np.savez_compressed(f, **arrays)
        return path

    @classmethod
    def load(cls, path: str | Path) -> Recording:
        with np.load(path) as z:
            header = json.loads(bytes(z["header"]).decode())
            bodies: dict[str, dict[str, np.ndarray]] = {}
            strings: dict[str, dict[str, np.ndarray]] = {}
            for key in z.files:
                if key in ("time", "header"):
                    continue
                kind, name, q = key.split("|")
                (bodies if kind == "b" else strings).setdefault(name, {})[q] = z[key]
            return cls(time=z["time"], bodies=bodies, strings=strings,
                       unstable=header["unstable"], reason=header["reason"],
                       families=header.get("families", {}))  # fmt: skip
