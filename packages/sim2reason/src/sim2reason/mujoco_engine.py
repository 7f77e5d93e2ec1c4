"""MuJoCo engine (extra ``mujoco``): every family of the analytic engine, simulated.

Each connected component becomes one MJCF model compiled headless (no rendering, no OpenGL)
and stepped with MuJoCo's RK4 integrator at ``dt``, as in the paper's recorder (Sec. 3.2):
string chains are slide joints tied by joint equalities ``q_i = q_{i+1}`` (the string), whose
constraint force is the string tension, and the movable pulley is the equality
``q_cw = 2 q_load``; Coulomb friction, pushing forces, driving torques, thrust and uniform
electric forces are applied as generalised forces each step; springs are joint stiffness;
the pendulum and the rigid body on an axle are hinges. Position- and velocity-dependent
forces (inverse-square gravity of the orbit, the magnetic force ``q v x B``) go through
MuJoCo's passive-force callback, which it evaluates at every RK4 stage; the rocket's mass is
updated before each step (to its value at the middle of the step). Bounces and collisions
(1-D and oblique) use the paper's impulse correction after ``mj_step`` (restitution applied
to the normal velocity) instead of MuJoCo's soft contacts.

Parity with :class:`~sim2reason.engines.AnalyticEngine` is tested to a relative 1e-3 on
MuJoCo 3.2.0, 3.3.4 and 4.0.0; other major.minor versions warn once.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
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
    body_buffer,
    chain_bodies,
    components,
    finish_body,
    solve_string_chain,
)
from sim2reason.errors import ConfigError
from sim2reason.families import G_ORBIT, record_rigid_rotation, record_rocket
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
    """Simulate scenes in MuJoCo (RK4, headless): every family of the analytic engine."""

    name = "mujoco"
    families = ANALYTIC_FAMILIES

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
            # One builder per family (string chains share ``_string``).
            getattr(self, f"_{ENTITY_TYPES[c.entities[0].type].family}")(c, dt, n, t, rec)
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

    @contextmanager
    def _passive(self, force: Any) -> Iterator[None]:
        """Install ``force(model, data)`` as MuJoCo's passive-force callback for a run.

        MuJoCo calls it at every stage of its RK4 step (and in ``mj_forward``), so a
        position- or velocity-dependent force is integrated to RK4 order; a force written into
        ``qfrc_applied`` once per step is held constant over the step (first order in ``dt``).
        """
        mj = self.mujoco
        prev = mj.get_mjcb_passive()
        mj.set_mjcb_passive(force)
        try:
            yield
        finally:
            mj.set_mjcb_passive(prev)

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

    # -- the later families (sim2reason.families) ----------------------------------------
    def _spring_incline(self, c: Component, dt: float, n: int, t: np.ndarray,
                        rec: Recording) -> None:  # fmt: skip
        e = c.entities[0]
        m, k, ang = e.param("mass"), e.param("stiffness"), math.radians(e.param("angle"))
        p0 = _pos0(e)
        u = np.array([-math.cos(ang), 0.0, -math.sin(ang)])  # down the slope
        # A slide joint down the slope: MuJoCo's gravity gives m g sin(theta) along it, the
        # joint stiffness the spring (natural length at q = 0, the release point).
        xml = (f'<body pos="{p0[0]} {p0[1]} {p0[2]}"><joint type="slide" axis="{u[0]} {u[1]} {u[2]}" '
               f'stiffness="{k}" springref="0"/><inertial pos="0 0 0" mass="{m}" diaginertia="{_I} {_I} {_I}"/></body>')  # fmt: skip
        model, data = self._model(xml, dt)
        out = self._run(model, data, n, len(t))
        x = out["q"][:, 0]
        pe = (0.5 * k * x * x - m * G * math.sin(ang) * x)[:, None]  # elastic + gravitational
        rec.bodies[f"{e.name}.block"] = _kinematics(
            m, p0 + out["q"] * u, out["qd"] * u, out["qdd"] * u, p0[2], pe
        )

    def _rigid_rotation(self, c: Component, dt: float, n: int, t: np.ndarray,
                        rec: Recording) -> None:  # fmt: skip
        e = c.entities[0]
        m, r, tau = e.param("mass"), e.param("radius"), e.param("torque")
        cf, d = e.param("inertia_factor"), e.param("offset")
        th0 = math.radians(e.param("angle"))
        ic = cf * m * r * r  # about the centre of mass; MuJoCo adds m d^2 for the axle
        p0 = _pos0(e)
        xml = (f'<body pos="{p0[0]} {p0[1]} {p0[2]}"><joint type="hinge" axis="0 -1 0"/>'
               f'<inertial pos="0 0 {-d}" mass="{m}" diaginertia="{ic} {ic} {ic}"/></body>')  # fmt: skip
        model, data = self._model(xml, dt)
        data.qpos[0] = th0
        # The driving torque is a generalised force on the hinge; gravity acts on the offset COM.
        out = self._run(model, data, n, len(t), qfrc=np.array([tau]))
        th, om, al = out["q"][:, 0], out["qd"][:, 0], out["qdd"][:, 0]
        record_rigid_rotation(e, th, om, al, ic + m * d * d, rec)

    def _planar_point(self, p0: np.ndarray, m: float, dt: float) -> tuple[Any, Any]:
        """A point mass on two slide joints (x, y) at ``p0``: gravity (along z) does no work."""
        xml = (f'<body pos="{p0[0]} {p0[1]} {p0[2]}"><joint type="slide" axis="1 0 0"/>'
               f'<joint type="slide" axis="0 1 0"/><inertial pos="0 0 0" mass="{m}" diaginertia="{_I} {_I} {_I}"/></body>')  # fmt: skip
        return self._model(xml, dt)

    def _orbital(self, c: Component, dt: float, n: int, t: np.ndarray, rec: Recording) -> None:
        e = c.entities[0]
        m, big, r_body = e.param("mass"), e.param("central_mass"), e.param("central_radius")
        r0, v0 = e.param("radius"), e.param("speed")
        gm = G_ORBIT * big
        p0 = _pos0(e)
        model, data = self._planar_point(p0, m, dt)
        data.qpos[:] = [r0, 0.0]
        data.qvel[:] = [0.0, v0]

        def gravity(mdl: Any, d: Any) -> None:
            x, y = float(d.qpos[0]), float(d.qpos[1])
            d2 = x * x + y * y
            f = -gm * m / (d2 * math.sqrt(d2))
            d.qfrc_passive[0] += f * x
            d.qfrc_passive[1] += f * y

        crashed: list[float] = []

        def crash(d: Any) -> None:
            if not crashed and d.qpos[0] ** 2 + d.qpos[1] ** 2 <= r_body * r_body:
                crashed.append(float(d.time))
                d.qpos[:] = np.nan  # stops the run

        with self._passive(gravity):
            out = self._run(model, data, n, len(t), post=crash)
        if crashed:
            rec.unstable = True
            rec.reason = (f"{e.name}: the satellite reached the central body (radius "
                          f"{r_body:g} m) at t={crashed[0]:.3f} s")  # fmt: skip
            return
        dist = np.hypot(out["q"][:, 0], out["q"][:, 1])
        pe = (-gm * m * (1.0 / dist - 1.0 / r0))[:, None]
        rec.bodies[f"{e.name}.satellite"] = _planar_body(out, p0, m, pe)

    def _electromagnetic(self, c: Component, dt: float, n: int, t: np.ndarray,
                         rec: Recording) -> None:  # fmt: skip
        e = c.entities[0]
        m, qc, v0 = e.param("mass"), e.param("charge"), e.param("speed")
        ef, bf = e.param("e_field"), e.param("b_field")
        phi = math.radians(e.param("e_angle"))
        p0 = _pos0(e)
        model, data = self._planar_point(p0, m, dt)
        data.qvel[:] = [v0, 0.0]
        # The electric force q E is constant (an applied force); the magnetic q v x B (B along
        # +z) depends on the velocity, so it is a passive force evaluated at every RK4 stage.
        qe = np.array([qc * ef * math.cos(phi), qc * ef * math.sin(phi)])
        qb = qc * bf

        def lorentz(mdl: Any, d: Any) -> None:
            d.qfrc_passive[0] += qb * d.qvel[1]
            d.qfrc_passive[1] -= qb * d.qvel[0]

        with self._passive(lorentz):
            out = self._run(model, data, n, len(t), qfrc=qe)
        pe = -(out["q"] @ qe)[:, None]  # electric potential energy change -q E . (r - r0)
        rec.bodies[f"{e.name}.particle"] = _planar_body(out, p0, m, pe)

    def _rocket(self, c: Component, dt: float, n: int, t: np.ndarray, rec: Recording) -> None:
        e = c.entities[0]
        dry, fuel = e.param("mass"), e.param("fuel_mass")
        ve, b = e.param("exhaust_speed"), e.param("burn_rate")
        m0, tb, thrust = dry + fuel, fuel / b, b * ve
        p0 = _pos0(e)
        xml = (f'<body pos="{p0[0]} {p0[1]} {p0[2]}"><joint type="slide" axis="0 0 1"/>'
               f'<inertial pos="0 0 0" mass="{m0}" diaginertia="{_I} {_I} {_I}"/></body>')  # fmt: skip
        model, data = self._model(xml, dt)
        mj = self.mujoco

        def load(mass: float, force: float) -> None:
            # The body's mass is updated before each step; thrust is an applied force, and on
            # the pad a normal force holds the rocket until the thrust beats its weight.
            if model.body_mass[1] != mass:
                model.body_mass[1] = mass
                # MuJoCo keeps the joint-space inertia of qpos0 among the model's constants
                # (4.0 reads it for this one-joint body): recompute them; this resets qpos.
                qpos = data.qpos.copy()
                mj.mj_setConst(model, data)
                data.qpos[:] = qpos
            rest = data.qpos[0] <= 0.0 and data.qvel[0] <= 0.0 and force < mass * G
            data.qfrc_applied[0] = mass * G if rest else force

        nt = len(t)
        z, v, a, mass = (np.empty(nt) for _ in range(4))
        j = 0
        for i in range(n + 1):
            ti = i * dt
            if i % self.record_every == 0:
                load(m0 - b * ti if ti < tb else dry, thrust if ti < tb else 0.0)
                mj.mj_forward(model, data)
                z[j], v[j], a[j] = data.qpos[0], data.qvel[0], data.qacc[0]
                mass[j] = model.body_mass[1]
                j += 1
            if i == n:
                break
            # Burning share of this step; the mass at the middle of the burning part.
            f = min(max((tb - ti) / dt, 0.0), 1.0)
            load(m0 - b * (ti + 0.5 * f * dt) if f > 0 else dry, thrust * f)
            mj.mj_step(model, data)
            if data.qpos[0] < 0.0:  # back on the ground: it stays there
                data.qpos[0], data.qvel[0] = 0.0, 0.0
        record_rocket(e, z, v, a, mass, rec)

    def _movable_pulley(self, c: Component, dt: float, n: int, t: np.ndarray,
                        rec: Recording) -> None:  # fmt: skip
        e = c.entities[0]
        m, big = e.param("mass"), e.param("counterweight")
        p0 = _pos0(e)
        pc = p0 + np.array([0.5, 0.0, 0.0])
        # The load slides down, the counterweight up; the string under the movable pulley makes
        # the counterweight move twice as far, a joint equality q_cw = 2 q_load whose
        # constraint force is the string tension.
        xml = (f'<body pos="{p0[0]} {p0[1]} {p0[2]}"><joint name="load" type="slide" axis="0 0 -1"/>'
               f'<inertial pos="0 0 0" mass="{m}" diaginertia="{_I} {_I} {_I}"/></body>'
               f'<body pos="{pc[0]} {pc[1]} {pc[2]}"><joint name="cw" type="slide" axis="0 0 1"/>'
               f'<inertial pos="0 0 0" mass="{big}" diaginertia="{_I} {_I} {_I}"/></body>')  # fmt: skip
        eq = '<equality><joint joint1="cw" joint2="load" polycoef="0 2 0 0 0"/></equality>'
        model, data = self._model(xml, dt, eq)
        out = self._run(model, data, n, len(t))
        for k, (name, mass, start, u) in enumerate((("load", m, p0, (0.0, 0.0, -1.0)),
                                                    ("counterweight", big, pc, (0.0, 0.0, 1.0)))):  # fmt: skip
            ua = np.array(u)
            rec.bodies[f"{e.name}.{name}"] = _kinematics(
                mass, start + out["q"][:, k : k + 1] * ua, out["qd"][:, k : k + 1] * ua,
                out["qdd"][:, k : k + 1] * ua, start[2],
            )  # fmt: skip
        rec.strings[f"{e.name}.rope"] = {"tension": np.abs(out["eq"][:, 0:1])}

    def _complex_collision(self, c: Component, dt: float, n: int, t: np.ndarray,
                           rec: Recording) -> None:  # fmt: skip
        e = c.entities[0]
        m1, m2, v = e.param("mass_1"), e.param("mass_2"), e.param("speed")
        rest, rad = e.param("restitution"), e.param("radius")
        gap, b = e.param("gap"), e.param("offset")
        if gap * gap + b * b < 4 * rad * rad:
            rec.unstable = True
            rec.reason = f"{e.name}: the balls overlap at t=0 (centre distance below 2 x radius)"
            return
        p0 = _pos0(e)
        starts = (p0, p0 + np.array([gap, b, 0.0]))
        xml = "".join(
            f'<body pos="{s[0]} {s[1]} {s[2]}"><joint type="slide" axis="1 0 0"/>'
            f'<joint type="slide" axis="0 1 0"/><inertial pos="0 0 0" mass="{mass}" '
            f'diaginertia="{_I} {_I} {_I}"/></body>'
            for s, mass in zip(starts, (m1, m2), strict=True)
        )
        model, data = self._model(xml, dt)
        data.qvel[:] = [v, 0.0, 0.0, 0.0]
        off = np.array([gap, b])  # ball 2's start relative to ball 1's
        four_r2 = 4 * rad * rad

        def collide(d: Any) -> None:
            # Impulse correction once the smooth balls overlap while approaching: rewind to
            # first contact, exchange the normal impulse (restitution e, tangential velocities
            # kept), and replay the rest of the step with the new velocities.
            rel = off + d.qpos[2:4] - d.qpos[0:2]  # ball 1 -> ball 2
            w = d.qvel[2:4] - d.qvel[0:2]
            if rel @ rel >= four_r2 or rel @ w >= 0.0:
                return
            # |rel - w s| = 2R for the time s since contact (the larger root).
            ww, rw = float(w @ w), float(rel @ w)
            s = (rw + math.sqrt(max(rw * rw - ww * (rel @ rel - four_r2), 0.0))) / ww
            nrm = (rel - w * s) / (2 * rad)
            jn = -(1 + rest) * float(w @ nrm) / (1 / m1 + 1 / m2)
            v1, v2 = d.qvel[0:2] - jn / m1 * nrm, d.qvel[2:4] + jn / m2 * nrm
            d.qpos[0:2] += (v1 - d.qvel[0:2]) * s
            d.qpos[2:4] += (v2 - d.qvel[2:4]) * s
            d.qvel[0:2], d.qvel[2:4] = v1, v2

        out = self._run(model, data, n, len(t), post=collide)
        for k, (name, mass, start) in enumerate((("ball_1", m1, starts[0]),
                                                 ("ball_2", m2, starts[1]))):  # fmt: skip
            buf, q = body_buffer(len(t))
            buf[:, 0:3] = start
            buf[:, 0:2] += out["q"][:, 2 * k : 2 * k + 2]
            buf[:, 3:9] = 0.0
            buf[:, 3:5] = out["qd"][:, 2 * k : 2 * k + 2]
            buf[:, 6:8] = out["qdd"][:, 2 * k : 2 * k + 2]
            rec.bodies[f"{e.name}.{name}"] = finish_body(buf, q, mass, float(p0[2]))


def _planar_body(out: dict[str, np.ndarray], p0: np.ndarray, m: float,
                 pe: np.ndarray) -> dict[str, np.ndarray]:  # fmt: skip
    """Body quantities of a point moving in the horizontal plane through ``p0`` from a
    two-slide-joint run (``out`` of ``_run``), with potential energy ``pe`` ``[n, 1]``."""
    buf, q = body_buffer(len(out["q"]))
    buf[:, 0:2] = out["q"] + p0[:2]
    buf[:, 2] = p0[2]
    buf[:, 3:5] = out["qd"]
    buf[:, 5] = 0.0
    buf[:, 6:8] = out["qdd"]
    buf[:, 8] = 0.0
    return finish_body(buf, q, m, pe=pe)
