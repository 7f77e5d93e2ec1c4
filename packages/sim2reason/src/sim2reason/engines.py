"""Simulation engines behind one protocol: ``simulate(scene, dt, duration) -> Recording``.

:class:`AnalyticEngine` (default, numpy only) solves each connected component of a scene in
closed form where one exists (constant force, strings over pulleys with Coulomb friction,
projectiles with restitution bounces, 1-D collisions, springs) and integrates the nonlinear
pendulum with classical RK4 at the step ``dt``; this stands in for the paper's MuJoCo recorder
(Sec. 3.2) on CPU. The rigid-body, oblique-collision, movable-pulley, spring-on-incline,
orbital, rocket and electromagnetic families live in :mod:`sim2reason.families`.
Recordings are filled with numpy over the whole time grid (one buffer per body).
:class:`~sim2reason.mujoco_engine.MuJoCoEngine` simulates every family in MuJoCo (extra
``mujoco``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from sim2reason.dsl import ENTITY_TYPES, Entity, Scene, validate
from sim2reason.errors import ConfigError, SceneError, UnsupportedFamilyError
from sim2reason.recording import Recording

__all__ = [
    "ANALYTIC_FAMILIES",
    "BODY_COLUMNS",
    "AnalyticEngine",
    "Component",
    "Engine",
    "G",
    "StringBody",
    "body_buffer",
    "components",
    "finish_body",
    "get_engine",
    "line_body",
    "solve_string_chain",
    "uniform_body",
]

log = logging.getLogger(__name__)

G = 9.81
"""Gravitational acceleration used throughout (m/s^2), as in the paper's scenes."""

ANALYTIC_FAMILIES = (
    "constant_force",
    "incline",
    "atwood",
    "table_pulley",
    "incline_pulley",
    "string_chain",
    "projectile",
    "collision1d",
    "spring_mass",
    "pendulum",
    "rigid_rotation",
    "complex_collision",
    "movable_pulley",
    "spring_incline",
    "orbital",
    "rocket",
    "electromagnetic",
)
"""Every family :class:`AnalyticEngine` simulates (the last seven in :mod:`sim2reason.families`)."""


@runtime_checkable
class Engine(Protocol):
    """What every engine provides."""

    name: str

    def simulate(self, scene: Scene, dt: float = 1e-3, duration: float = 2.0) -> Recording: ...


@dataclass
class Component:
    """A connected group of entities (joined by tendons) simulated together."""

    family: str
    entities: list[Entity]
    tendons: list[str]
    """Tendon names between consecutive entities (string families only)."""


def _check_times(dt: float, duration: float) -> None:
    if not (isinstance(dt, int | float) and math.isfinite(dt) and dt > 0):
        raise SceneError(f"dt={dt!r}: the time step must be a positive number of seconds")
    if not (isinstance(duration, int | float) and math.isfinite(duration) and duration > 0):
        raise SceneError(f"duration={duration!r}: must be a positive number of seconds")
    if duration / dt > 5e6:
        raise SceneError(f"duration/dt={duration / dt:.0f} steps: too many (max 5e6)")


_LONE_STRING_FAMILY = {"HangingMass": "constant_force", "TableBlock": "constant_force",
                       "InclineBlock": "incline"}  # fmt: skip
"""Family of a string entity with no tendon attached."""


def _single(ent: Entity) -> Component:
    """The one-entity component of ``ent`` (a string entity without tendons included)."""
    family = ENTITY_TYPES[ent.type].family
    if family == "string":
        family = _LONE_STRING_FAMILY[ent.type]
    return Component(family, [ent], [])


def components(scene: Scene) -> list[Component]:
    """Split ``scene`` into connected components and name each one's dynamics family.

    String entities (hanging masses, table and incline blocks) joined by tendons form a chain
    that moves with one string coordinate; every other entity is its own component. Raises
    :class:`UnsupportedFamilyError` for entity types no engine here implements.
    """
    validate(scene)
    if not scene.connections:  # no strings: every entity is its own component
        return [_single(e) for e in scene.entities]
    adj: dict[str, list[tuple[str, str]]] = {e.name: [] for e in scene.entities}
    for t, name in zip(scene.connections, scene.tendon_names(), strict=True):
        a, b = t.ends[0].entity, t.ends[1].entity
        adj[a].append((b, name))
        adj[b].append((a, name))
    out: list[Component] = []
    done: set[str] = set()
    for ent in scene.entities:
        if ent.name in done:
            continue
        if ENTITY_TYPES[ent.type].family != "string":
            done.add(ent.name)
            out.append(_single(ent))
            continue
        # Collect the component, then walk it from an end to get the chain order.
        comp, stack = {ent.name}, [ent.name]
        while stack:
            for nb, _ in adj[stack.pop()]:
                if nb not in comp:
                    comp.add(nb)
                    stack.append(nb)
        ends = [n for n in comp if len(adj[n]) <= 1]
        if not ends:
            raise UnsupportedFamilyError(
                f"entities {sorted(comp)} form a closed string loop; only open chains are "
                "supported (try the mujoco engine for other layouts)"
            )
        start = min(ends, key=[e.name for e in scene.entities].index)
        order, tendons, prev = [start], [], None
        while True:
            nxt = [(nb, tn) for nb, tn in adj[order[-1]] if nb != prev]
            if not nxt:
                break
            prev = order[-1]
            order.append(nxt[0][0])
            tendons.append(nxt[0][1])
        ents = [scene.entity(n) for n in order]
        kinds = [e.type for e in ents]
        if len(ents) == 1:
            fam = _LONE_STRING_FAMILY[kinds[0]]
        elif kinds == ["HangingMass", "HangingMass"]:
            fam = "atwood"
        elif len(ents) == 2 and "HangingMass" in kinds and "TableBlock" in kinds:
            fam = "table_pulley"
        elif len(ents) == 2 and "HangingMass" in kinds and "InclineBlock" in kinds:
            fam = "incline_pulley"
        else:
            fam = "string_chain"
        done.update(order)
        out.append(Component(fam, ents, tendons))
    return out


@dataclass
class StringBody:
    """One body of a string chain: its +s direction, driving force G and normal force N."""

    entity: Entity
    direction: np.ndarray
    drive: float
    normal: float
    mass: float
    mu_k: float
    mu_s: float


def chain_bodies(ents: list[Entity]) -> list[StringBody]:
    """Direction of motion for increasing string coordinate s, for each chain body in order.

    +s moves the string from the first body toward the last: the first body is pulled toward
    the second, the last one moves away from its neighbour. A lone hanging mass falls, a lone
    incline block slides down.
    """
    k = len(ents)
    out = []
    for i, e in enumerate(ents):
        m = e.param("mass")
        if e.type == "HangingMass":
            up = i == 0 and k > 1
            d = np.array([0.0, 0.0, 1.0 if up else -1.0])
            out.append(StringBody(e, d, -m * G if up else m * G, 0.0, m, 0.0, 0.0))
        elif e.type == "TableBlock":
            out.append(StringBody(e, np.array([1.0, 0.0, 0.0]), 0.0, m * G, m,
                                  e.param("mu_k"), e.param("mu_s")))  # fmt: skip
        else:  # InclineBlock: up the slope unless it is the last body of the chain
            th = math.radians(e.param("angle"))
            upslope = np.array([math.cos(th), 0.0, math.sin(th)])
            down = i == k - 1
            out.append(StringBody(e, -upslope if down else upslope,
                                  m * G * math.sin(th) * (1 if down else -1),
                                  m * G * math.cos(th), m, e.param("mu_k"), e.param("mu_s")))  # fmt: skip
    return out


def solve_string_chain(bodies: list[StringBody]) -> tuple[float, list[float], list[float]]:
    """Acceleration along s, friction per body and tension per string segment.

    Newton's second law for a 1-DOF chain with Coulomb friction: static if the net drive
    ``|sum G_i| <= sum mu_s N_i``; else ``a = sign(D)(|D| - sum mu_k N_i) / sum m_i``. Tensions
    follow from each body's balance ``m_i a = G_i + f_i + T_i - T_{i-1}``.
    """
    D = sum(b.drive for b in bodies)
    M = sum(b.mass for b in bodies)
    fs = sum(b.mu_s * b.normal for b in bodies)
    fk = sum(b.mu_k * b.normal for b in bodies)
    if abs(D) <= fs + 1e-12:
        a = 0.0
        fric = [-D * b.mu_s * b.normal / fs if fs > 0 else 0.0 for b in bodies]
    else:
        sign = 1.0 if D > 0 else -1.0
        a = sign * (abs(D) - fk) / M
        fric = [-sign * b.mu_k * b.normal for b in bodies]
    tensions, prev = [], 0.0
    for b, f in zip(bodies[:-1], fric[:-1], strict=True):
        prev = b.mass * a - b.drive - f + prev
        tensions.append(prev)
    return a, fric, tensions


#: Column layout of a body's recording buffer: quantity -> (first column, width).
BODY_COLUMNS = {"position": (0, 3), "velocity": (3, 3), "acceleration": (6, 3),
                "momentum": (9, 3), "net_force": (12, 3), "kinetic_energy": (15, 1),
                "potential_energy_change": (16, 1)}  # fmt: skip
_VIEW_INDEX = tuple((k, (slice(None), slice(i, i + w))) for k, (i, w) in BODY_COLUMNS.items())


def body_buffer(n: int, width: int = 17) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """One ``[n, width]`` buffer and the views of :data:`BODY_COLUMNS` into it.

    A body's quantities share one allocation so that filling and checking a recording stays
    a handful of numpy calls over the time grid; extra columns (``width > 17``) are free for a
    family's own quantities.
    """
    buf = np.empty((n, width))
    return buf, _views(buf)


def finish_body(buf: np.ndarray, q: dict[str, np.ndarray], m: float | np.ndarray,
                z0: float | None = None, pe: np.ndarray | None = None) -> dict[str, np.ndarray]:  # fmt: skip
    """Fill momentum, net force, kinetic energy and potential-energy change of a
    :func:`body_buffer` from its position, velocity and acceleration columns (``m`` a scalar
    or a ``[n, 1]`` mass series; ``pe`` overrides the gravitational ``m g (z - z0)``).

    Long grids go one column at a time: numpy's loops over a ``[n, 3]`` block of the
    ``[n, 17]`` buffer run along its short rows and cost several times more per element; on
    short grids the per-call overhead dominates, so blocks go whole. Both give the same bits.
    """
    if len(buf) < 48:
        np.multiply(m, buf[:, 3:9], out=buf[:, 9:15])  # momentum and net force
        vel = buf[:, 3:6]
        np.sum(vel * vel, axis=1, keepdims=True, out=buf[:, 15:16])
        buf[:, 15:16] *= 0.5 * m
        if pe is None:
            np.subtract(buf[:, 2:3], z0, out=buf[:, 16:17])
            buf[:, 16:17] *= m * G
        else:
            buf[:, 16:17] = pe
        return q
    mc = m[:, 0] if isinstance(m, np.ndarray) and m.ndim == 2 else m
    for j in range(3, 9):  # momentum and net force
        np.multiply(mc, buf[:, j], out=buf[:, j + 6])
    ke, tmp = buf[:, 15], np.empty(len(buf))
    np.multiply(buf[:, 3], buf[:, 3], out=ke)
    for j in (4, 5):  # the sum of squares in the order np.sum takes it along a row
        np.multiply(buf[:, j], buf[:, j], out=tmp)
        ke += tmp
    ke *= 0.5 * mc
    if pe is None:
        np.subtract(buf[:, 2], z0, out=buf[:, 16])
        buf[:, 16] *= mc * G
    else:
        buf[:, 16:17] = pe
    return q


def _views(buf: np.ndarray) -> dict[str, np.ndarray]:
    return {k: buf[ix] for k, ix in _VIEW_INDEX}


def uniform_body(m: float, p0: Sequence[float], u: Sequence[float], a: float,
                 basis: np.ndarray) -> dict[str, np.ndarray]:  # fmt: skip
    """Recording of a body of mass ``m`` starting at rest at ``p0`` with constant acceleration
    ``a`` along the unit direction ``u``, on the time basis ``[1, t, t^2]`` (``[T, 3]``).

    Every recorded column is a polynomial of degree <= 2 in t, so the ``[T, 17]`` recording
    is one product of the basis with a ``[3, 17]`` coefficient matrix (built from scalars).
    """
    ux, uy, uz = u.tolist() if isinstance(u, np.ndarray) else map(float, u)
    x0, y0, z0 = p0.tolist() if isinstance(p0, np.ndarray) else map(float, p0)
    ha, ma = 0.5 * a, m * a
    ax, ay, az, fx, fy, fz = a * ux, a * uy, a * uz, ma * ux, ma * uy, ma * uz
    coef = np.array([  # rows: 1, t, t^2 (one flat list: numpy reads it faster than nested)
        x0, y0, z0, 0.0, 0.0, 0.0, ax, ay, az, 0.0, 0.0, 0.0, fx, fy, fz, 0.0, 0.0,
        0.0, 0.0, 0.0, ax, ay, az, 0.0, 0.0, 0.0, fx, fy, fz, 0.0, 0.0, 0.0, 0.0, 0.0,
        ha * ux, ha * uy, ha * uz, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
        0.0, 0.0, 0.0, 0.5 * m * a * a, m * G * ha * uz,
    ]).reshape(3, 17)  # fmt: skip
    return _views(basis @ coef)


def line_body(m: float, p0: np.ndarray, u: np.ndarray, s: np.ndarray, v: np.ndarray,
              a: float | np.ndarray, pe: np.ndarray | None = None) -> dict[str, np.ndarray]:  # fmt: skip
    """Recording of a body of mass ``m`` moving along the fixed unit direction ``u`` from
    ``p0``: displacement ``s[T]``, velocity ``v[T]`` and acceleration ``a`` (scalar or
    ``[T]``) along ``u``; ``pe`` overrides the gravitational potential-energy change.

    Every column is linear in the basis ``(s, v, v^2, a, 1)``, so the whole ``[T, 17]``
    recording is one matrix product of that basis with a ``[5, 17]`` coefficient matrix.
    """
    ux, uy, uz = u.tolist() if isinstance(u, np.ndarray) else map(float, u)
    x0, y0, z0 = p0.tolist() if isinstance(p0, np.ndarray) else map(float, p0)
    scalar_a = isinstance(a, float | int)
    ac = float(a) if scalar_a else 0.0
    ar = 0.0 if scalar_a else 1.0
    z3 = (0.0, 0.0, 0.0)
    coef = np.array([  # rows: s, v, v^2, a, 1
        ux, uy, uz, *z3, *z3, *z3, *z3, 0.0, m * G * uz,
        *z3, ux, uy, uz, *z3, m * ux, m * uy, m * uz, *z3, 0.0, 0.0,
        *z3, *z3, *z3, *z3, *z3, 0.5 * m, 0.0,
        *z3, *z3, ar * ux, ar * uy, ar * uz, *z3, ar * m * ux, ar * m * uy, ar * m * uz,
        0.0, 0.0,
        x0, y0, z0, *z3, ac * ux, ac * uy, ac * uz, *z3, m * ac * ux, m * ac * uy,
        m * ac * uz, 0.0, 0.0,
    ]).reshape(5, 17)  # fmt: skip
    basis = np.empty((len(s), 5))
    basis[:, 0] = s
    basis[:, 1] = v
    np.multiply(v, v, out=basis[:, 2])
    basis[:, 3] = 0.0 if scalar_a else a
    basis[:, 4] = 1.0
    buf = basis @ coef
    if pe is not None:
        buf[:, 16:17] = pe
    return _views(buf)


def _kinematics(m: float, pos: np.ndarray, vel: np.ndarray, acc: np.ndarray,
                z0: float, pe: np.ndarray | None = None) -> dict[str, np.ndarray]:  # fmt: skip
    buf, q = body_buffer(len(pos))
    buf[:, 0:3] = pos
    buf[:, 3:6] = vel
    buf[:, 6:9] = acc
    return finish_body(buf, q, m, z0, pe)


def _pos0(e: Entity) -> np.ndarray:
    return np.asarray(e.position, dtype=float)


_UX = (1.0, 0.0, 0.0)


class AnalyticEngine:
    """Closed-form / RK4 numpy engine for the CPU families (the default engine).

    Families: ``constant_force``, ``incline`` (angle, mu), ``atwood``, ``table_pulley``,
    ``incline_pulley``, ``string_chain``, ``projectile`` (restitution bounces), ``collision1d``
    (restitution e), ``spring_mass`` and ``pendulum`` (RK4 at ``dt``), plus the seven families
    of :mod:`sim2reason.families` (closed forms, RK4 for the pivoted rigid body and orbits).
    """

    name = "analytic"
    families = ANALYTIC_FAMILIES

    def __init__(self, record_every: int = 1) -> None:
        if not isinstance(record_every, int) or record_every < 1:
            raise ConfigError(f"record_every={record_every!r}: must be a positive int")
        self.record_every = record_every
        self._grids: dict[tuple[int, float], tuple[np.ndarray, np.ndarray]] = {}
        self._basis = np.ones((1, 3))

    def time_grid(self, n: int, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """Recorded times of an ``n``-step run and the basis ``[1, t, t^2]`` (read-only, cached
        per ``(n, dt)`` so that recording a closed-form scene costs one matrix product)."""
        key = (n, dt)
        hit = self._grids.get(key)
        if hit is None:
            t = np.arange(0, n + 1, self.record_every) * dt
            basis = np.stack([np.ones_like(t), t, t * t], axis=1)
            t.flags.writeable = False
            basis.flags.writeable = False
            if len(self._grids) > 16:
                self._grids.clear()
            hit = self._grids[key] = (t, basis)
        return hit

    def simulate(self, scene: Scene, dt: float = 1e-3, duration: float = 2.0) -> Recording:
        _check_times(dt, duration)
        comps = components(scene)
        n = round(duration / dt)
        # The closed-form families read the basis [1, t, t^2] of this run's grid from here.
        t, self._basis = self.time_grid(n, dt)
        rec = Recording(time=t, bodies={}, strings={})
        for c in comps:
            for e in c.entities:
                rec.families[e.name] = c.family
            if ENTITY_TYPES[c.entities[0].type].family == "string":
                self._string(c, t, dt, rec)
            else:
                method = getattr(self, f"_{c.family}", None)
                if method is not None:
                    method(c, t, dt, rec)
                else:
                    from sim2reason.families import simulate_component

                    simulate_component(c, t, dt, rec, self.record_every, self._basis)
            if rec.unstable:
                break
        return rec.check_finite()

    # -- families -------------------------------------------------------------------------
    def _string(self, c: Component, t: np.ndarray, dt: float, rec: Recording) -> None:
        bodies = chain_bodies(c.entities)
        a, _, tensions = solve_string_chain(bodies)
        for b in bodies:
            rec.bodies[f"{b.entity.name}.{ENTITY_TYPES[b.entity.type].bodies[0]}"] = uniform_body(
                b.mass, b.entity.position, b.direction, a, self._basis
            )
        for name, tens in zip(c.tendons, tensions, strict=True):
            rec.strings[name] = {"tension": np.full((len(t), 1), abs(tens))}

    def _constant_force(self, c: Component, t: np.ndarray, dt: float, rec: Recording) -> None:
        e = c.entities[0]
        m, f = e.param("mass"), e.param("force")
        a = f / m
        rec.bodies[f"{e.name}.block"] = uniform_body(m, e.position, _UX, a, self._basis)

    def _projectile(self, c: Component, t: np.ndarray, dt: float, rec: Recording) -> None:
        e = c.entities[0]
        m, h, v0 = e.param("mass"), e.param("height"), e.param("speed")
        ang, rest = math.radians(e.param("angle")), e.param("restitution")
        p0 = _pos0(e)
        vx = v0 * math.cos(ang)
        # Flight segments between bounces (vertical motion only; horizontal is uniform): each
        # is (start time, height, vertical speed, gravity) and holds the samples t >= start
        # before the next start; resting contact is a segment without gravity.
        segs: list[tuple[float, float, float, float]] = []
        t0, z, vz = 0.0, h, v0 * math.sin(ang)
        end = float(t[-1])
        for _ in range(100_000):
            if z <= 0.0 and vz <= 1e-9:  # on the ground: resting contact from t0 on
                segs.append((t0, 0.0, 0.0, 0.0))
                break
            tau = (vz + math.sqrt(vz * vz + 2 * G * max(z, 0.0))) / G
            segs.append((t0, z, vz, G))
            t0 += tau
            if t0 > end:
                break
            vz = rest * (G * tau - vz)  # impact speed times e
            z = 0.0
            if vz < 1e-6:
                vz = 0.0
        else:  # bounce budget spent: the rest of the run stays at the origin, as zeros
            segs.append((t0, -float(p0[2]), 0.0, 0.0))
        # Every vertical series in a few array ops: a segment's values repeated over its
        # samples (t is sorted, so they are the run between consecutive start indices).
        if len(segs) == 1:
            s0, zs, vzs, g = segs[0]
        else:
            cols = np.array(segs)
            counts = np.diff(np.searchsorted(t, cols[:, 0]), append=len(t))
            s0, zs, vzs, g = np.repeat(cols, counts, axis=0).T
        dtt = t - s0
        gdt = g * dtt
        zc = p0[2] + zs + vzs * dtt - 0.5 * gdt * dtt
        vzc = vzs - gdt
        buf, q = body_buffer(len(t))
        buf[:, 0] = p0[0] + vx * t
        buf[:, 1] = p0[1]
        buf[:, 2] = zc
        buf[:, 3] = vx
        buf[:, 4] = 0.0
        buf[:, 5] = vzc
        buf[:, 6:8] = 0.0
        buf[:, 8] = 0.0 - g  # -G in flight, +0.0 at rest
        rec.bodies[f"{e.name}.ball"] = finish_body(buf, q, m, p0[2] + h)

    def _collision1d(self, c: Component, t: np.ndarray, dt: float, rec: Recording) -> None:
        e = c.entities[0]
        m1, m2 = e.param("mass_1"), e.param("mass_2")
        v1, v2 = e.param("velocity_1"), e.param("velocity_2")
        gap, r = e.param("gap"), e.param("restitution")
        p0 = _pos0(e)
        tc = gap / (v1 - v2) if v1 > v2 else float(t[-1]) + 1.0  # no collision in the run
        w1 = (m1 * v1 + m2 * v2 - m2 * r * (v1 - v2)) / (m1 + m2)
        w2 = (m1 * v1 + m2 * v2 + m1 * r * (v1 - v2)) / (m1 + m2)
        after = t >= tc
        x1 = np.where(after, v1 * tc + w1 * (t - tc), v1 * t)
        x2 = np.where(after, gap + v2 * tc + w2 * (t - tc), gap + v2 * t)
        for name, m, x, v, w in (("block_1", m1, x1, v1, w1), ("block_2", m2, x2, v2, w2)):
            rec.bodies[f"{e.name}.{name}"] = line_body(m, p0, _UX, x, np.where(after, w, v), 0.0)

    def _spring_mass(self, c: Component, t: np.ndarray, dt: float, rec: Recording) -> None:
        e = c.entities[0]
        m, k, amp = e.param("mass"), e.param("stiffness"), e.param("amplitude")
        w = math.sqrt(k / m)
        x = amp * np.cos(w * t)
        pe = (0.5 * k * (x * x - amp * amp))[:, None]
        rec.bodies[f"{e.name}.block"] = line_body(
            m, _pos0(e), _UX, x, -amp * w * np.sin(w * t), -w * w * x, pe
        )

    def _pendulum(self, c: Component, t: np.ndarray, dt: float, rec: Recording) -> None:
        e = c.entities[0]
        m, L = e.param("mass"), e.param("length")
        th, om = math.radians(e.param("angle")), 0.0
        k = G / L
        n = round(t[-1] / dt) if len(t) > 1 else 0
        every = self.record_every
        ths = np.empty(len(t))
        oms = np.empty(len(t))
        sin = math.sin
        j = 0
        for i in range(n + 1):
            if i % every == 0:
                ths[j], oms[j] = th, om
                j += 1
            if i == n:
                break
            # Classical RK4 on (theta, omega), theta'' = -(g/L) sin(theta).
            a1 = -k * sin(th)
            a2 = -k * sin(th + 0.5 * dt * om)
            a3 = -k * sin(th + 0.5 * dt * (om + 0.5 * dt * a1))
            a4 = -k * sin(th + dt * (om + 0.5 * dt * a2))
            th, om = (
                th + dt * (om + dt * (a1 + a2 + a3) / 6.0),
                om + dt * (a1 + 2 * a2 + 2 * a3 + a4) / 6.0,
            )
        alpha = -k * np.sin(ths)
        pivot = _pos0(e) + np.array([0.0, 0.0, L])
        s, co = np.sin(ths), np.cos(ths)
        pos = pivot + L * np.stack([s, np.zeros_like(s), -co], axis=1)
        tang = np.stack([co, np.zeros_like(s), s], axis=1)
        radial_in = np.stack([-s, np.zeros_like(s), co], axis=1)
        vel = (L * oms)[:, None] * tang
        acc = (L * alpha)[:, None] * tang + (L * oms * oms)[:, None] * radial_in
        z0 = pivot[2] - L * math.cos(math.radians(e.param("angle")))
        body = _kinematics(m, pos, vel, acc, z0)
        body["angular_velocity"] = np.stack([np.zeros_like(s), -oms, np.zeros_like(s)], axis=1)
        body["angular_acceleration"] = np.stack(
            [np.zeros_like(s), -alpha, np.zeros_like(s)], axis=1
        )
        rec.bodies[f"{e.name}.bob"] = body
        rec.strings[f"{e.name}.rod"] = {"tension": (m * G * co + m * L * oms * oms)[:, None]}


def get_engine(name: str = "analytic", **kwargs: Any) -> Engine:
    """``"analytic"`` (default) or ``"mujoco"`` (needs the ``mujoco`` extra)."""
    if name == "analytic":
        return AnalyticEngine(**kwargs)
    if name == "mujoco":
        from sim2reason.mujoco_engine import MuJoCoEngine

        return MuJoCoEngine(**kwargs)
    raise ConfigError(f"engine={name!r}: use 'analytic' or 'mujoco'")
