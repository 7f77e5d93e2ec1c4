"""MuJoCo engine (extra ``mujoco``): the analytic engine's first ten families, simulated.

Each connected component becomes one MJCF model compiled headless (no rendering, no OpenGL)
and stepped with MuJoCo's RK4 integrator at ``dt``, as in the paper's recorder (Sec. 3.2):
string chains are slide joints tied by joint equalities ``q_i = q_{i+1}`` (the string), whose
constraint force is the string tension; Coulomb friction and pushing forces are applied as
generalised forces each step; springs are joint stiffness; the pendulum is a hinge. Bounces
and 1-D collisions use the paper's impulse correction after ``mj_step`` (restitution applied to
the normal velocity) instead of MuJoCo's soft contacts.

Parity with :class:`~sim2reason.engines.AnalyticEngine` is tested to a relative 1e-3 on
MuJoCo 3.2.0, 3.3.4 and 4.0.0; other major.minor versions warn once. The seven families of
:mod:`sim2reason.families` have no MuJoCo model here (an error points to the analytic engine).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from sim2reason.dsl import ENTITY_TYPES, Scene
from sim2reason.engines import (
    ANALYTIC_FAMILIES,
    Component,
    G,
    _check_times,
    _kinematics,
    _pos0,
    chain_bodies,
    components,
    solve_string_chain,
)
from sim2reason.errors import ConfigError, UnsupportedFamilyError
from sim2reason.recording import Recording

__all__ = ["TESTED_MUJOCO", "MuJoCoEngine"]

#: MuJoCo major.minor versions the parity tests pass on.
TESTED_MUJOCO = ("3.2", "3.3", "4.0")

_warned = False


def _import_mujoco() -> Any:
    global _warned
    try:
        import mujoco
    except ImportError as e:
        from llmcore.errors import MissingExtraError

        raise MissingExtraError("sim2reason.engines.MuJoCoEngine", "mujoco",
                                package="sim2reason") from e  # fmt: skip
    mm = ".".join(mujoco.__version__.split(".")[:2])
    if mm not in TESTED_MUJOCO and not _warned:
        _warned = True
        warnings.warn(
            f"mujoco {mujoco.__version__} is untested with sim2reason (parity tested on "
            f"{', '.join(TESTED_MUJOCO)}); check results against the analytic engine",
            stacklevel=3,
        )
    return mujoco


_I = 1e-12  # point masses: negligible rotational inertia about the centre of mass
_HEAD = """<mujoco><option timestep="{dt}" integrator="RK4" gravity="0 0 -{g}"/>
<default><equality solref="{sr} 1" solimp="0.9999 0.9999 0.0001"/></default><worldbody>"""


class MuJoCoEngine:
    """Simulate scenes in MuJoCo (RK4, headless): the analytic engine's string, pushed-block,
    projectile, 1-D collision, spring and pendulum families."""

    name = "mujoco"
    families = ANALYTIC_FAMILIES[:10]

    def __init__(self, record_every: int = 1, solref: float | None = None) -> None:
        if not isinstance(record_every, int) or record_every < 1:
            raise ConfigError(f"record_every={record_every!r}: must be a positive int")
        self.record_every = record_every
        self.solref = solref
        self.mujoco = _import_mujoco()

    def simulate(self, scene: Scene, dt: float = 1e-3, duration: float = 2.0) -> Recording:
        _check_times(dt, duration)
        comps = components(scene)
        n = round(duration / dt)
        t = np.arange(0, n + 1, self.record_every) * dt
        rec = Recording(time=t, bodies={}, strings={})
        for c in comps:
            for e in c.entities:
                rec.families[e.name] = c.family
            kind = ENTITY_TYPES[c.entities[0].type].family
            method = getattr(self, f"_{kind}", None)
            if method is None:
                raise UnsupportedFamilyError(
                    f"family {c.family!r} (entity {c.entities[0].name!r}) has no MuJoCo model "
                    "here; use the analytic engine (get_engine('analytic')) for it"
                )
            method(c, dt, n, t, rec)
            if rec.unstable:
                break
        return rec.check_finite()

    # -- helpers -------------------------------------------------------------------------
    def _model(self, body_xml: str, dt: float, extra: str = "") -> tuple[Any, Any]:
        mj = self.mujoco
        sr = self.solref if self.solref is not None else 2 * dt
        xml = _HEAD.format(dt=dt, g=G, sr=sr) + body_xml + "</worldbody>" + extra + "</mujoco>"
        model = mj.MjModel.from_xml_string(xml)
        return model, mj.MjData(model)

    def _run(self, model: Any, data: Any, n: int, nt: int, qfrc: np.ndarray | None = None,
             post: Any = None, every: int | None = None) -> dict[str, np.ndarray]:  # fmt: skip
        """Step ``n`` times, recording qpos/qvel/qacc and equality forces at every ``every``."""
        mj = self.mujoco
        every = every or self.record_every
        nq, nv = model.nq, model.nv
        out = {"q": np.empty((nt, nq)), "qd": np.empty((nt, nv)), "qdd": np.empty((nt, nv)),
               "eq": np.zeros((nt, max(model.neq, 1)))}  # fmt: skip
        j = 0
        for i in range(n + 1):
            if qfrc is not None:
                data.qfrc_applied[:] = qfrc
            if i % every == 0:
                mj.mj_forward(model, data)
                out["q"][j] = data.qpos
                out["qd"][j] = data.qvel
                out["qdd"][j] = data.qacc
                if model.neq:
                    rows = np.flatnonzero(data.efc_type == mj.mjtConstraint.mjCNSTR_EQUALITY)
                    out["eq"][j, : len(rows)] = data.efc_force[rows]
                j += 1
            if i == n:
                break
            mj.mj_step(model, data)
            if post is not None:
                post(data)
            if not np.all(np.isfinite(data.qpos)):
                out["q"][j:] = np.nan
                break
        return out

    # -- families ------------------------------------------------------------------------
    def _string(self, c: Component, dt: float, n: int, t: np.ndarray, rec: Recording) -> None:
        bodies = chain_bodies(c.entities)
        _, fric, _ = solve_string_chain(bodies)
        xml, eqs = "", ""
        for i, b in enumerate(bodies):
            p0, u = _pos0(b.entity), b.direction
            xml += (f'<body pos="{p0[0]} {p0[1]} {p0[2]}"><joint name="j{i}" type="slide" '
                    f'axis="{u[0]} {u[1]} {u[2]}"/><inertial pos="0 0 0" mass="{b.mass}" diaginertia="{_I} {_I} {_I}"/></body>')  # fmt: skip
            if i:
                eqs += f'<joint joint1="j{i - 1}" joint2="j{i}" polycoef="0 1 0 0 0"/>'
        model, data = self._model(xml, dt, f"<equality>{eqs}</equality>" if eqs else "")
        # Coulomb friction as a generalised force along each slide (sign of the motion).
        out = self._run(model, data, n, len(t), qfrc=np.asarray(fric, dtype=float))
        for i, b in enumerate(bodies):
            p0, u = _pos0(b.entity), b.direction
            pos = p0 + out["q"][:, i : i + 1] * u
            vel = out["qd"][:, i : i + 1] * u
            acc = out["qdd"][:, i : i + 1] * u
            key = f"{b.entity.name}.{ENTITY_TYPES[b.entity.type].bodies[0]}"
            rec.bodies[key] = _kinematics(b.mass, pos, vel, acc, p0[2])
        for k, name in enumerate(c.tendons):
            rec.strings[name] = {"tension": np.abs(out["eq"][:, k : k + 1])}

    def _constant_force(self, c: Component, dt: float, n: int, t: np.ndarray,
                        rec: Recording) -> None:  # fmt: skip
        e = c.entities[0]
        m, p0 = e.param("mass"), _pos0(e)
        xml = (f'<body pos="{p0[0]} {p0[1]} {p0[2]}"><joint type="slide" axis="1 0 0"/>'
               f'<inertial pos="0 0 0" mass="{m}" diaginertia="{_I} {_I} {_I}"/></body>')  # fmt: skip
        model, data = self._model(xml, dt)
        out = self._run(model, data, n, len(t), qfrc=np.array([e.param("force")]))
        u = np.array([1.0, 0.0, 0.0])
        rec.bodies[f"{e.name}.block"] = _kinematics(
            m, p0 + out["q"] * u, out["qd"] * u, out["qdd"] * u, p0[2]
        )

    def _projectile(self, c: Component, dt: float, n: int, t: np.ndarray, rec: Recording) -> None:
        e = c.entities[0]
        m, h, v0 = e.param("mass"), e.param("height"), e.param("speed")
        ang, rest = math.radians(e.param("angle")), e.param("restitution")
        p0 = _pos0(e)
        xml = (f'<body pos="{p0[0]} {p0[1]} {p0[2]}"><joint name="x" type="slide" axis="1 0 0"/>'
               f'<joint name="z" type="slide" axis="0 0 1"/><inertial pos="0 0 0" mass="{m}" diaginertia="{_I} {_I} {_I}"/>'
               "</body>")  # fmt: skip
        model, data = self._model(xml, dt)
        data.qpos[:] = [0.0, h]
        data.qvel[:] = [v0 * math.cos(ang), v0 * math.sin(ang)]

        def bounce(d: Any) -> None:
            # Impulse correction: reflect the normal velocity with restitution at the floor.
            if d.qpos[1] < 0.0 and d.qvel[1] < 0.0:
                # Rewind to the impact (tau seconds ago), reflect, and replay tau seconds.
                z, vz = float(d.qpos[1]), float(d.qvel[1])
                tau = (-vz - math.sqrt(max(vz * vz + 2 * G * z, 0.0))) / G
                v_imp = -(vz + G * tau)
                d.qvel[1] = rest * v_imp - G * tau
                d.qpos[1] = rest * v_imp * tau - 0.5 * G * tau * tau
                if d.qvel[1] < 1e-3:
                    d.qpos[1], d.qvel[1] = 0.0, 0.0
            if d.qpos[1] <= 0.0 and d.qvel[1] == 0.0:
                d.qfrc_applied[1] = m * G  # resting contact: normal force balances gravity

        out = self._run(model, data, n, len(t), post=bounce)
        pos = np.tile(p0, (len(t), 1))
        pos[:, 0] += out["q"][:, 0]
        pos[:, 2] += out["q"][:, 1]
        vel = np.zeros_like(pos)
        acc = np.zeros_like(pos)
        vel[:, [0, 2]] = out["qd"]
        acc[:, [0, 2]] = out["qdd"]
        rec.bodies[f"{e.name}.ball"] = _kinematics(m, pos, vel, acc, p0[2] + h)

    def _collision1d(self, c: Component, dt: float, n: int, t: np.ndarray,
                     rec: Recording) -> None:  # fmt: skip
        e = c.entities[0]
        m1, m2, gap, r = (
            e.param("mass_1"),
            e.param("mass_2"),
            e.param("gap"),
            e.param("restitution"),
        )
        p0 = _pos0(e)
        xml = "".join(
            f'<body pos="{p0[0] + x0} {p0[1]} {p0[2]}"><joint type="slide" axis="1 0 0"/>'
            f'<inertial pos="0 0 0" mass="{m}" diaginertia="{_I} {_I} {_I}"/></body>'
            for x0, m in ((0.0, m1), (gap, m2))
        )
        model, data = self._model(xml, dt)
        data.qvel[:] = [e.param("velocity_1"), e.param("velocity_2")]

        def collide(d: Any) -> None:
            # Impulse correction when the point masses meet (restitution r, momentum kept).
            if d.qpos[0] >= gap + d.qpos[1] and d.qvel[0] > d.qvel[1]:
                v1, v2 = float(d.qvel[0]), float(d.qvel[1])
                tau = (d.qpos[0] - gap - d.qpos[1]) / (v1 - v2)  # time since contact
                p = m1 * v1 + m2 * v2
                w1 = (p - m2 * r * (v1 - v2)) / (m1 + m2)
                w2 = (p + m1 * r * (v1 - v2)) / (m1 + m2)
                d.qvel[0], d.qvel[1] = w1, w2
                d.qpos[0] -= (v1 - w1) * tau
                d.qpos[1] -= (v2 - w2) * tau

        out = self._run(model, data, n, len(t), post=collide)
        for k, (name, m, x0) in enumerate((("block_1", m1, 0.0), ("block_2", m2, gap))):
            pos = np.tile(p0, (len(t), 1))
            pos[:, 0] += x0 + out["q"][:, k]
            vel = np.zeros_like(pos)
            vel[:, 0] = out["qd"][:, k]
            acc = np.zeros_like(pos)
            acc[:, 0] = out["qdd"][:, k]
            rec.bodies[f"{e.name}.{name}"] = _kinematics(m, pos, vel, acc, p0[2])

    def _spring_mass(self, c: Component, dt: float, n: int, t: np.ndarray,
                     rec: Recording) -> None:  # fmt: skip
        e = c.entities[0]
        m, k, amp = e.param("mass"), e.param("stiffness"), e.param("amplitude")
        p0 = _pos0(e)
        xml = (f'<body pos="{p0[0]} {p0[1]} {p0[2]}"><joint type="slide" axis="1 0 0" '
               f'stiffness="{k}" springref="0"/><inertial pos="0 0 0" mass="{m}" diaginertia="{_I} {_I} {_I}"/></body>')  # fmt: skip
        model, data = self._model(xml, dt)
        data.qpos[0] = amp
        out = self._run(model, data, n, len(t))
        u = np.array([1.0, 0.0, 0.0])
        x = out["q"][:, 0]
        pe = (0.5 * k * (x * x - amp * amp))[:, None]
        rec.bodies[f"{e.name}.block"] = _kinematics(
            m, p0 + out["q"] * u, out["qd"] * u, out["qdd"] * u, p0[2], pe
        )

    def _pendulum(self, c: Component, dt: float, n: int, t: np.ndarray, rec: Recording) -> None:
        e = c.entities[0]
        m, L, th0 = e.param("mass"), e.param("length"), math.radians(e.param("angle"))
        pivot = _pos0(e) + np.array([0.0, 0.0, L])
        xml = (f'<body pos="{pivot[0]} {pivot[1]} {pivot[2]}"><joint type="hinge" axis="0 -1 0"/>'
               f'<inertial pos="0 0 {-L}" mass="{m}" diaginertia="{_I} {_I} {_I}"/></body>')  # fmt: skip
        model, data = self._model(xml, dt)
        data.qpos[0] = th0
        out = self._run(model, data, n, len(t))
        th, om, al = out["q"][:, 0], out["qd"][:, 0], out["qdd"][:, 0]
        s, co = np.sin(th), np.cos(th)
        z = np.zeros_like(s)
        pos = pivot + L * np.stack([s, z, -co], axis=1)
        tang = np.stack([co, z, s], axis=1)
        vel = (L * om)[:, None] * tang
        acc = (L * al)[:, None] * tang + (L * om * om)[:, None] * np.stack([-s, z, co], axis=1)
        body = _kinematics(m, pos, vel, acc, pivot[2] - L * math.cos(th0))
        body["angular_velocity"] = np.stack([z, -om, z], axis=1)
        body["angular_acceleration"] = np.stack([z, -al, z], axis=1)
        rec.bodies[f"{e.name}.bob"] = body
        # Rod tension from the radial balance of the bob (the hinge holds no equality row).
        rec.strings[f"{e.name}.rod"] = {"tension": (m * G * co + m * L * om * om)[:, None]}
