"""The rigid-body, oblique-collision, movable-pulley, spring-on-incline, orbital, rocket and
electromagnetic families of the analytic engine, with their scene sentences and closed forms.

These are the paper's remaining scene types (Sec. 3.1: rigid-body rotation, complex
collisions, difficult pulleys and spring-mass systems, orbital motion, rockets and
electromagnetism), each reduced here to one entity whose motion has a closed form or a
low-dimensional ODE:

- ``rigid_rotation``: a body with moment of inertia ``c m r^2`` about its centre on a fixed
  horizontal axle ``d`` from its centre of mass, driven by a constant torque;
  ``I_p theta'' = tau - m g d sin(theta)`` with ``I_p = c m r^2 + m d^2`` (closed form when
  ``d = 0``, else classical RK4 at ``dt``).
- ``complex_collision``: two smooth balls on a table, an oblique collision with restitution
  ``e`` along the line of centres (closed form).
- ``movable_pulley``: a load on a massless movable pulley and a counterweight on the string's
  free end, ``a = g (m - 2M) / (m + 4M)``, ``T = 3 m M g / (m + 4M)`` (closed form).
- ``spring_incline``: a block on a frictionless incline on a spring released at natural
  length, ``x = x_eq (1 - cos(w t))`` with ``x_eq = m g sin(theta) / k`` (closed form).
- ``orbital``: a satellite about a fixed central mass, ``G = 1`` (the official scenes'
  normalised constant), classical RK4 at ``dt``; hitting the central body marks the run
  unstable.
- ``rocket``: vertical launch in uniform gravity with a constant burn rate (Tsiolkovsky with
  gravity, liftoff once thrust exceeds weight, ballistic after burnout; closed form).
- ``electromagnetic``: a charge in uniform in-plane electric and perpendicular magnetic fields
  (cyclotron motion with E x B drift, closed form).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from sim2reason.dsl import Entity, Scene
from sim2reason.engines import (
    Component,
    G,
    _pos0,
    body_buffer,
    components,
    finish_body,
    line_body,
    uniform_body,
)
from sim2reason.errors import UnsupportedFamilyError
from sim2reason.recording import Recording

if TYPE_CHECKING:
    import sympy as sp

__all__ = [
    "CATEGORY",
    "FAMILY_SIMULATORS",
    "G_ORBIT",
    "describe_entity",
    "simulate_component",
    "symbolic_expr",
]

G_ORBIT = 1.0
"""Gravitational constant of the orbital scenes (normalised units, stated in their text)."""

#: Question menu (:data:`sim2reason.qa.QUANTITIES`) of each entity type of this module.
CATEGORY = {
    "RigidRotationEntity": "rigid_rotation",
    "ComplexCollisionPlane": "collision",
    "MassWithMovablePulley": "pulley",
    "SpringMassPlaneEntity": "spring",
    "OrbitalMotionEntity": "orbital",
    "RocketEntity": "orbital",
    "ElectroMagneticEntity": "orbital",
}

# Extra columns after the 17 standard ones (see sim2reason.engines.BODY_COLUMNS).
_ROT_COLUMNS = {"angular_velocity": (17, 3), "angular_acceleration": (20, 3),
                "angular_momentum": (23, 3), "net_torque": (26, 3),
                "moment_of_inertia": (29, 1)}  # fmt: skip


# -- simulators ---------------------------------------------------------------------------
def _rk4_rotation(theta0: float, k_drive: float, k_grav: float, dt: float, n: int,
                  every: int, size: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """RK4 on ``theta'' = k_drive - k_grav sin(theta)`` from rest; recorded every ``every``."""
    th, om = theta0, 0.0
    ths = np.empty(size)
    oms = np.empty(size)
    sin = math.sin
    j = 0
    for i in range(n + 1):
        if i % every == 0:
            ths[j], oms[j] = th, om
            j += 1
        if i == n:
            break
        a1 = k_drive - k_grav * sin(th)
        a2 = k_drive - k_grav * sin(th + 0.5 * dt * om)
        a3 = k_drive - k_grav * sin(th + 0.5 * dt * (om + 0.5 * dt * a1))
        a4 = k_drive - k_grav * sin(th + dt * (om + 0.5 * dt * a2))
        th, om = (th + dt * (om + dt * (a1 + a2 + a3) / 6.0),
                  om + dt * (a1 + 2 * a2 + 2 * a3 + a4) / 6.0)  # fmt: skip
    return ths, oms


def _rigid_rotation(e: Entity, t: np.ndarray, dt: float, every: int, rec: Recording) -> None:
    m, r, tau = e.param("mass"), e.param("radius"), e.param("torque")
    c, d = e.param("inertia_factor"), e.param("offset")
    th0 = math.radians(e.param("angle"))
    inertia = c * m * r * r + m * d * d
    if d == 0.0:
        alpha0 = tau / inertia
        th = th0 + 0.5 * alpha0 * t * t
        om = alpha0 * t
    else:
        n = round(float(t[-1]) / dt) if len(t) > 1 else 0
        th, om = _rk4_rotation(th0, tau / inertia, m * G * d / inertia, dt, n, every, len(t))
    alpha = (tau - m * G * d * np.sin(th)) / inertia
    record_rigid_rotation(e, th, om, alpha, inertia, rec)


def record_rigid_rotation(e: Entity, th: np.ndarray, om: np.ndarray, alpha: np.ndarray,
                          inertia: float, rec: Recording) -> None:  # fmt: skip
    """Record a rigid body turning about its horizontal axle (angle ``th`` from the downward
    vertical, angular velocity and acceleration per recorded time; ``inertia`` about the axle)
    as body ``<name>.body``: its centre of mass, energies and rotational columns. Shared by
    both engines."""
    m, d = e.param("mass"), e.param("offset")
    th0 = math.radians(e.param("angle"))
    buf, q = body_buffer(len(th), 30)
    s, co = np.sin(th), np.cos(th)
    p0 = _pos0(e)
    buf[:, 0:9] = 0.0
    buf[:, 0:3] = p0
    buf[:, 0] += d * s
    buf[:, 2] -= d * co
    buf[:, 3] = d * om * co
    buf[:, 5] = d * om * s
    buf[:, 6] = d * (alpha * co - om * om * s)
    buf[:, 8] = d * (alpha * s + om * om * co)
    finish_body(buf, q, m, float(p0[2]) - d * math.cos(th0))
    buf[:, 15] = 0.5 * inertia * om * om  # rotational about the axle (includes the COM's motion)
    buf[:, 17:29] = 0.0
    buf[:, 18] = om
    buf[:, 21] = alpha
    buf[:, 24] = inertia * om
    buf[:, 27] = inertia * alpha
    buf[:, 29] = inertia
    q.update({k: buf[:, i : i + w] for k, (i, w) in _ROT_COLUMNS.items()})
    rec.bodies[f"{e.name}.body"] = q


def _complex_collision(e: Entity, t: np.ndarray, dt: float, every: int,
                       rec: Recording) -> None:  # fmt: skip
    m1, m2, v = e.param("mass_1"), e.param("mass_2"), e.param("speed")
    rest, rad = e.param("restitution"), e.param("radius")
    gap, b = e.param("gap"), e.param("offset")
    p0 = _pos0(e)
    if gap * gap + b * b < 4 * rad * rad:
        rec.unstable = True
        rec.reason = f"{e.name}: the balls overlap at t=0 (centre distance below 2 x radius)"
        return
    # Centre distance 2R is reached when (gap - v t)^2 + b^2 = 4 R^2.
    reach = 4 * rad * rad - b * b
    tc = math.inf
    if v > 0 and reach > 0 and gap > math.sqrt(reach):
        tc = (gap - math.sqrt(reach)) / v
    w1 = np.array([v, 0.0, 0.0])
    w2 = np.zeros(3)
    if math.isfinite(tc):
        nrm = np.array([math.sqrt(reach), b, 0.0]) / (2 * rad)  # ball 1 -> ball 2 at contact
        jn = (1 + rest) * float(w1 @ nrm) / (1 / m1 + 1 / m2)
        w1, w2 = w1 - jn / m1 * nrm, w2 + jn / m2 * nrm
    after = (t >= tc)[:, None]
    tb = np.minimum(t, tc)[:, None]
    ta = np.maximum(t - tc, 0.0)[:, None] if math.isfinite(tc) else np.zeros((len(t), 1))
    v1 = np.array([v, 0.0, 0.0])
    for name, m, start, before, after_v in (
        ("ball_1", m1, p0, v1, w1),
        ("ball_2", m2, p0 + np.array([gap, b, 0.0]), np.zeros(3), w2),
    ):
        buf, q = body_buffer(len(t))
        buf[:, 0:3] = start + tb * before + ta * after_v
        buf[:, 3:6] = np.where(after, after_v, before)
        buf[:, 6:9] = 0.0
        rec.bodies[f"{e.name}.{name}"] = finish_body(buf, q, m, float(p0[2]))


def _movable_pulley(e: Entity, t: np.ndarray, dt: float, every: int, rec: Recording,
                    basis: np.ndarray) -> None:  # fmt: skip
    m, big = e.param("mass"), e.param("counterweight")
    a = G * (m - 2 * big) / (m + 4 * big)  # the load's downward acceleration
    p0 = _pos0(e)
    rec.bodies[f"{e.name}.load"] = uniform_body(m, p0, (0.0, 0.0, -1.0), a, basis)
    rec.bodies[f"{e.name}.counterweight"] = uniform_body(
        big, p0 + np.array([0.5, 0.0, 0.0]), (0.0, 0.0, 1.0), 2 * a, basis
    )
    tension = 3 * m * big * G / (m + 4 * big)
    rec.strings[f"{e.name}.rope"] = {"tension": np.full((len(t), 1), tension)}


def _spring_incline(e: Entity, t: np.ndarray, dt: float, every: int, rec: Recording) -> None:
    m, k, ang = e.param("mass"), e.param("stiffness"), math.radians(e.param("angle"))
    w = math.sqrt(k / m)
    x_eq = m * G * math.sin(ang) / k
    x = x_eq * (1 - np.cos(w * t))
    vel = x_eq * w * np.sin(w * t)
    acc = x_eq * w * w * np.cos(w * t)
    down = (-math.cos(ang), 0.0, -math.sin(ang))
    pe = (0.5 * k * x * x - m * G * math.sin(ang) * x)[:, None]  # elastic + gravitational
    rec.bodies[f"{e.name}.block"] = line_body(m, _pos0(e), down, x, vel, acc, pe)


def _orbital(e: Entity, t: np.ndarray, dt: float, every: int, rec: Recording) -> None:
    m, big, r0, v0 = e.param("mass"), e.param("central_mass"), e.param("radius"), e.param("speed")
    r_body = e.param("central_radius")
    gm = G_ORBIT * big
    n = round(float(t[-1]) / dt) if len(t) > 1 else 0
    x, y, vx, vy = r0, 0.0, 0.0, v0
    out = np.empty((len(t), 4))
    r2_body = r_body * r_body
    h, h6 = 0.5 * dt, dt / 6.0
    j = 0
    for i in range(n + 1):
        if i % every == 0:
            out[j] = (x, y, vx, vy)
            j += 1
        d2 = x * x + y * y
        if d2 <= r2_body:
            rec.unstable = True
            rec.reason = (f"{e.name}: the satellite reached the central body (radius "
                          f"{r_body:g} m) at t={i * dt:.3f} s")  # fmt: skip
            return
        if i == n:
            break
        # Classical RK4 on (x, y, vx, vy) with a = -G M r / |r|^3, written out inline.
        f = -gm / (d2 * d2**0.5)
        ax1, ay1 = f * x, f * y
        x2, y2 = x + h * vx, y + h * vy
        bx2, by2 = vx + h * ax1, vy + h * ay1
        d2 = x2 * x2 + y2 * y2
        f = -gm / (d2 * d2**0.5)
        ax2, ay2 = f * x2, f * y2
        x3, y3 = x + h * bx2, y + h * by2
        bx3, by3 = vx + h * ax2, vy + h * ay2
        d2 = x3 * x3 + y3 * y3
        f = -gm / (d2 * d2**0.5)
        ax3, ay3 = f * x3, f * y3
        x4, y4 = x + dt * bx3, y + dt * by3
        bx4, by4 = vx + dt * ax3, vy + dt * ay3
        d2 = x4 * x4 + y4 * y4
        f = -gm / (d2 * d2**0.5)
        ax4, ay4 = f * x4, f * y4
        x += h6 * (vx + 2 * bx2 + 2 * bx3 + bx4)
        y += h6 * (vy + 2 * by2 + 2 * by3 + by4)
        vx += h6 * (ax1 + 2 * ax2 + 2 * ax3 + ax4)
        vy += h6 * (ay1 + 2 * ay2 + 2 * ay3 + ay4)
    p0 = _pos0(e)
    dist = np.hypot(out[:, 0], out[:, 1])
    buf, q = body_buffer(len(t))
    buf[:, 0:2] = out[:, 0:2] + p0[:2]
    buf[:, 2] = p0[2]
    buf[:, 3:5] = out[:, 2:4]
    buf[:, 5] = 0.0
    buf[:, 6:8] = -gm * out[:, 0:2] / (dist**3)[:, None]
    buf[:, 8] = 0.0
    pe = (-gm * m * (1.0 / dist - 1.0 / r0))[:, None]
    rec.bodies[f"{e.name}.satellite"] = finish_body(buf, q, m, pe=pe)


def rocket_state(e: Entity, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                     np.ndarray]:  # fmt: skip
    """Height, vertical velocity, acceleration and mass of a vertically launched rocket.

    Mass ``m(t) = m0 - b t`` until the fuel is spent; it lifts off when the thrust ``b v_e``
    first exceeds the weight ``m(t) g`` (at ``t_L``); while burning
    ``v = v_e ln(m(t_L)/m(t)) - g (t - t_L)`` and
    ``z = v_e [(t - t_L) - (m(t)/b) ln(m(t_L)/m(t))] - g (t - t_L)^2 / 2``; after burnout it
    flies ballistically and rests once it is back on the ground.
    """
    dry, fuel = e.param("mass"), e.param("fuel_mass")
    ve, b = e.param("exhaust_speed"), e.param("burn_rate")
    m0 = dry + fuel
    tb = fuel / b
    t_lift = max(0.0, (m0 - b * ve / G) / b)
    mass = np.where(t < tb, m0 - b * np.minimum(t, tb), dry)
    z = np.zeros_like(t)
    v = np.zeros_like(t)
    a = np.zeros_like(t)
    if t_lift >= tb:
        return z, v, a, mass  # the thrust never beats the weight: it stays on the pad
    m_lift = m0 - b * t_lift
    burn = (t >= t_lift) & (t < tb)
    tau = t[burn] - t_lift
    mb = mass[burn]
    log = np.log(m_lift / mb)
    v[burn] = ve * log - G * tau
    z[burn] = ve * (tau - mb / b * log) - 0.5 * G * tau * tau
    a[burn] = b * ve / mb - G
    tau_b = tb - t_lift
    log_b = math.log(m_lift / dry)
    v_b = ve * log_b - G * tau_b
    z_b = ve * (tau_b - dry / b * log_b) - 0.5 * G * tau_b * tau_b
    # Ballistic after burnout until it lands (z = 0), then at rest.
    t_land = tb + (v_b + math.sqrt(v_b * v_b + 2 * G * z_b)) / G
    fly = (t >= tb) & (t < t_land)
    s = t[fly] - tb
    z[fly] = z_b + v_b * s - 0.5 * G * s * s
    v[fly] = v_b - G * s
    a[fly] = -G
    return z, v, a, mass


def _rocket(e: Entity, t: np.ndarray, dt: float, every: int, rec: Recording) -> None:
    record_rocket(e, *rocket_state(e, t), rec)


def record_rocket(e: Entity, z: np.ndarray, v: np.ndarray, a: np.ndarray, mass: np.ndarray,
                  rec: Recording) -> None:  # fmt: skip
    """Record a vertical rocket's height ``z`` above its pad, velocity, acceleration and mass
    (one value per recorded time) as body ``<name>.rocket``; shared by both engines."""
    p0 = _pos0(e)
    buf, q = body_buffer(len(z), 18)
    buf[:, 0:9] = 0.0
    buf[:, 0:3] = p0
    buf[:, 2] += z
    buf[:, 5] = v
    buf[:, 8] = a
    buf[:, 17] = mass
    mcol = buf[:, 17:18]
    finish_body(buf, q, mcol, float(p0[2]))
    q["mass"] = mcol
    rec.bodies[f"{e.name}.rocket"] = q


def em_state(e: Entity, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Planar position (relative), velocity and acceleration of a charge in uniform fields.

    With ``w = v_x + i v_y``, the Lorentz force ``q (E + v x B)`` (B along +z) gives
    ``dw/dt = (q/m) E_c - i Omega w`` with ``Omega = q B / m`` and ``E_c = E_x + i E_y``, so
    ``w = w_d + (w_0 - w_d) e^{-i Omega t}`` around the drift ``w_d = -i E_c / B``; without
    a magnetic field the acceleration ``q E / m`` is constant.
    """
    m, qc, v0 = e.param("mass"), e.param("charge"), e.param("speed")
    ef, bf = e.param("e_field"), e.param("b_field")
    phi = math.radians(e.param("e_angle"))
    ec = ef * complex(math.cos(phi), math.sin(phi))
    w0 = complex(v0, 0.0)
    om = qc * bf / m
    if om == 0.0:
        acc_c = qc * ec / m
        w = w0 + acc_c * t
        zpos = w0 * t + 0.5 * acc_c * t * t
        acc = np.full(len(t), acc_c)
    else:
        wd = -1j * ec / bf
        rot = np.exp(-1j * om * t)
        w = wd + (w0 - wd) * rot
        zpos = wd * t + (w0 - wd) * (1 - rot) / (1j * om)
        acc = (qc / m) * ec - 1j * om * w
    return zpos, w, acc


def _electromagnetic(e: Entity, t: np.ndarray, dt: float, every: int, rec: Recording) -> None:
    zpos, w, acc = em_state(e, t)
    m, qc, ef = e.param("mass"), e.param("charge"), e.param("e_field")
    phi = math.radians(e.param("e_angle"))
    p0 = _pos0(e)
    buf, q = body_buffer(len(t))
    buf[:, 0] = p0[0] + zpos.real
    buf[:, 1] = p0[1] + zpos.imag
    buf[:, 2] = p0[2]
    buf[:, 3] = w.real
    buf[:, 4] = w.imag
    buf[:, 5] = 0.0
    buf[:, 6] = acc.real
    buf[:, 7] = acc.imag
    buf[:, 8] = 0.0
    # Electric potential energy change -q E . (r - r0).
    pe = (-qc * ef * (math.cos(phi) * zpos.real + math.sin(phi) * zpos.imag))[:, None]
    rec.bodies[f"{e.name}.particle"] = finish_body(buf, q, m, pe=pe)


_Sim = Callable[[Entity, np.ndarray, float, int, Recording], None]

#: Family name -> simulator of one entity of that family.
FAMILY_SIMULATORS: dict[str, _Sim] = {
    "rigid_rotation": _rigid_rotation,
    "complex_collision": _complex_collision,
    "spring_incline": _spring_incline,
    "orbital": _orbital,
    "rocket": _rocket,
    "electromagnetic": _electromagnetic,
}


def simulate_component(c: Component, t: np.ndarray, dt: float, rec: Recording,
                       record_every: int = 1, basis: np.ndarray | None = None) -> None:  # fmt: skip
    """Simulate one single-entity component of a family of this module into ``rec``.

    ``t`` is the recorded time grid of an ``dt``-step run recorded every ``record_every``
    steps, ``basis`` its ``[1, t, t^2]`` columns (built here when not given).
    """
    e = c.entities[0]
    if c.family == "movable_pulley":
        if basis is None or len(basis) != len(t):
            basis = np.stack([np.ones_like(t), t, t * t], axis=1)
        _movable_pulley(e, t, dt, record_every, rec, basis)
        return
    sim = FAMILY_SIMULATORS.get(c.family)
    if sim is None:
        raise UnsupportedFamilyError(
            f"family {c.family!r} (entity {e.name!r}) has no analytic implementation; "
            f"known here: {sorted([*FAMILY_SIMULATORS, 'movable_pulley'])}"
        )
    sim(e, t, dt, record_every, rec)


# -- scene sentences ----------------------------------------------------------------------
_SHAPES = {0.5: "uniform disk", 1.0: "thin ring", 0.4: "solid sphere", 0.33: "uniform rod"}


def describe_entity(e: Entity, v: Callable[[str], str]) -> str | None:
    """The sentence of one entity of this module (``None`` for other types); ``v(key)`` gives a
    parameter's value, symbol or ``x`` as the question style needs."""
    n = e.name

    def p(key: str) -> str:
        # Optional parameters left at their default are stated as numbers.
        return v(key) if key in e.parameters else f"{e.param(key):g}"

    t = e.type
    if t == "RigidRotationEntity":
        c = e.param("inertia_factor")
        shape = _SHAPES.get(c, "rigid body")
        extent = "half-length" if shape == "uniform rod" else "radius"
        text = (f"A {shape} {n} of mass {p('mass')} kg and {extent} {p('radius')} m (moment of "
                f"inertia {p('inertia_factor')} m r^2 about its centre, with m its mass and r "
                f"its {extent}) turns in a vertical plane about a fixed horizontal axle, driven "
                f"by a constant torque of {p('torque')} N m about the axle.")  # fmt: skip
        if e.param("offset") == 0.0:
            return text + " The axle passes through its centre of mass."
        return text + (f" The axle is {p('offset')} m from its centre of mass, which starts at "
                       f"rest {p('angle')} degrees from directly below the axle.")  # fmt: skip
    if t == "ComplexCollisionPlane":
        return (f"On a frictionless horizontal table, ball 1 of {n} (mass {p('mass_1')} kg) "
                f"moves along +x at {p('speed')} m/s toward ball 2 of {n} (mass {p('mass_2')} "
                f"kg), which is at rest with its centre {p('gap')} m ahead along x and "
                f"{p('offset')} m to the side; both are smooth balls of radius {p('radius')} m "
                f"and they collide with restitution coefficient {p('restitution')} along the "
                "line of centres.")  # fmt: skip
    if t == "MassWithMovablePulley":
        return (f"A load of mass {p('mass')} kg hangs from a light movable pulley {n}; a string "
                "fixed to the ceiling runs down under that pulley, up over a fixed pulley, and "
                f"holds a counterweight of mass {p('counterweight')} kg on its other end.")  # fmt: skip
    if t == "SpringMassPlaneEntity":
        return (f"A block {n} of mass {p('mass')} kg on a frictionless incline at {p('angle')} "
                f"degrees to the horizontal is attached to a spring of stiffness "
                f"{p('stiffness')} N/m fixed further up the slope, and is released from rest "
                "with the spring at its natural length.")  # fmt: skip
    if t == "OrbitalMotionEntity":
        return (f"A satellite {n} of mass {p('mass')} kg is {p('radius')} m from the centre of "
                f"a fixed body of mass {p('central_mass')} kg and radius {p('central_radius')} m "
                f"and moves at {p('speed')} m/s perpendicular to the line joining them; the "
                "gravitational constant is G = 1 N m^2/kg^2 and no other force acts.")  # fmt: skip
    if t == "RocketEntity":
        return (f"A rocket {n} with a dry mass of {p('mass')} kg carries {p('fuel_mass')} kg of "
                f"fuel and stands on the ground; its engine burns fuel at {p('burn_rate')} kg/s "
                f"and ejects it at {p('exhaust_speed')} m/s relative to the rocket, straight "
                "down, so the rocket rises vertically once the thrust exceeds its weight (no "
                "air resistance).")  # fmt: skip
    if t == "ElectroMagneticEntity":
        return (f"A particle {n} of mass {p('mass')} kg and charge {p('charge')} C moves in a "
                f"horizontal plane (gravity is balanced), starting at {p('speed')} m/s along "
                f"+x, in a uniform electric field of {p('e_field')} N/C pointing "
                f"{p('e_angle')} degrees from +x within the plane and a uniform magnetic field "
                f"of {p('b_field')} T along +z, perpendicular to the plane.")  # fmt: skip
    return None


# -- closed forms for symbolic questions --------------------------------------------------
def _sym(e: Entity, key: str) -> sp.Expr:
    """The parameter's symbol when the scene states it, else its default as a number."""
    import sympy as sp

    from sim2reason.qa import symbol_for

    if key in e.parameters:
        return sp.Symbol(symbol_for(e.name, key))
    return sp.nsimplify(e.param(key))


def symbolic_expr(scene: Scene, attr: str) -> sp.Expr | None:
    """Closed-form sympy expression (in the question's symbols, ``t`` and ``g``) of ``attr``
    for the closed-form families other than string chains and pushed blocks; ``None`` where
    there is none (RK4 families, piecewise motions)."""
    import sympy as sp

    head, _, quantity = attr.rpartition(".")
    ent_name, _, part = head.partition(".")
    t, g = sp.Symbol("t"), sp.Symbol("g")
    try:
        e = scene.entity(ent_name)
    except KeyError:
        return None
    fam = next((c.family for c in components(scene) if any(x is e for x in c.entities)), None)
    table: dict[str, sp.Expr] = {}
    if fam == "spring_mass":
        m, k, amp = _sym(e, "mass"), _sym(e, "stiffness"), _sym(e, "amplitude")
        w = sp.sqrt(k / m)
        x = amp * sp.cos(w * t)
        vel = amp * w * sp.sin(w * t)
        table = {"displacement": amp - x, "velocity": vel, "acceleration": w**2 * x,
                 "net_force": k * x, "momentum": m * vel, "kinetic_energy": m * vel**2 / 2,
                 "potential_energy_change": k * (amp**2 - x**2) / 2}  # fmt: skip
    elif fam == "spring_incline":
        m, k, th = _sym(e, "mass"), _sym(e, "stiffness"), _sym(e, "angle")
        w = sp.sqrt(k / m)
        x_eq = m * g * sp.sin(th) / k
        vel = x_eq * w * sp.sin(w * t)
        acc = x_eq * w**2 * sp.cos(w * t)
        table = {"displacement": x_eq * (1 - sp.cos(w * t)), "velocity": vel,
                 "acceleration": acc, "net_force": m * acc, "momentum": m * vel,
                 "kinetic_energy": m * vel**2 / 2, "potential_energy_change": m * vel**2 / 2}  # fmt: skip
    elif fam == "movable_pulley":
        m, big = _sym(e, "mass"), _sym(e, "counterweight")
        a = g * (m - 2 * big) / (m + 4 * big)
        if quantity == "tension":
            return 3 * m * big * g / (m + 4 * big)
        mass, acc = (m, a) if part == "load" else (big, 2 * a)
        table = {"acceleration": acc, "velocity": acc * t, "displacement": acc * t**2 / 2,
                 "net_force": mass * acc, "momentum": mass * acc * t,
                 "kinetic_energy": mass * (acc * t) ** 2 / 2,
                 "potential_energy_change": mass * g * acc * t**2 / 2}  # fmt: skip
    elif fam == "rigid_rotation" and e.param("offset") == 0.0:
        m, r, tau, c = (_sym(e, k) for k in ("mass", "radius", "torque", "inertia_factor"))
        inertia = c * m * r**2
        alpha = tau / inertia
        table = {"angular_acceleration": alpha, "angular_velocity": alpha * t,
                 "angular_momentum": tau * t, "net_torque": tau, "moment_of_inertia": inertia,
                 "kinetic_energy": tau**2 * t**2 / (2 * inertia)}  # fmt: skip
    elif fam == "electromagnetic":
        m, qc, v0 = _sym(e, "mass"), _sym(e, "charge"), _sym(e, "speed")
        if e.param("b_field") == 0.0:
            ef, phi = _sym(e, "e_field"), _sym(e, "e_angle")
            a = qc * ef / m
            vx, vy = v0 + a * sp.cos(phi) * t, a * sp.sin(phi) * t
            dx, dy = v0 * t + a * sp.cos(phi) * t**2 / 2, a * sp.sin(phi) * t**2 / 2
            vel = sp.sqrt(vx**2 + vy**2)
            table = {"acceleration": a, "net_force": qc * ef, "velocity": vel,
                     "momentum": m * vel, "kinetic_energy": m * vel**2 / 2,
                     "displacement": sp.sqrt(dx**2 + dy**2)}  # fmt: skip
        elif e.param("e_field") == 0.0:
            bf = _sym(e, "b_field")
            table = {"velocity": v0, "momentum": m * v0, "kinetic_energy": m * v0**2 / 2,
                     "acceleration": qc * v0 * bf / m, "net_force": qc * v0 * bf}  # fmt: skip
    return table.get(quantity)
