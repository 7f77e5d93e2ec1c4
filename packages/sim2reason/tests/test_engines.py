"""Analytic engine against closed forms, and MuJoCo parity (spec tests 1, 2)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sim2reason.dsl import Entity, Scene, Tendon, TendonEnd
from sim2reason.engines import AnalyticEngine, G, components

A = AnalyticEngine()


def _one(etype: str, **params: float) -> Scene:
    return Scene("s", [Entity("e", etype, (0.0, 0.0, 0.0), params)])


def _pair(t1: str, p1: dict, t2: str, p2: dict) -> Scene:
    return Scene("s", [Entity("a", t1, (0.0, 0.0, 0.0), p1), Entity("b", t2, (0.0, 10.0, 0.0), p2)],
                 [Tendon([TendonEnd("a"), TendonEnd("b")])])  # fmt: skip


def test_projectile_closed_form():
    s = _one("ThrowingMotionEntity", mass=1.0, height=50.0, speed=8.0, angle=40.0)
    r = A.simulate(s)
    vx, vz = 8 * math.cos(math.radians(40)), 8 * math.sin(math.radians(40))
    for t in (0.5, 1.0, 1.5):
        x, z = vx * t, 50 + vz * t - 0.5 * G * t * t
        pos = r.series("e.ball.position")[r.index(t)]
        vel = r.series("e.ball.velocity")[r.index(t)]
        assert pos[0] == pytest.approx(x, rel=1e-6) and pos[2] == pytest.approx(z, rel=1e-6)
        assert vel[2] == pytest.approx(vz - G * t, rel=1e-6)
        assert r.value("e.ball.velocity", t) == pytest.approx(math.hypot(vx, vz - G * t), rel=1e-6)


def test_projectile_bounce_restitution():
    s = _one("ThrowingMotionEntity", mass=1.0, height=1.0, speed=0.0, angle=0.0, restitution=0.5)
    r = A.simulate(s)
    t_hit = math.sqrt(2 / G)
    v_hit = G * t_hit
    i = r.index(t_hit + 0.05)
    expected = 0.5 * v_hit - G * (r.time[i] - t_hit)
    assert r.series("e.ball.velocity")[i][2] == pytest.approx(expected, rel=1e-6)


def test_incline_frictionless_and_friction():
    r = A.simulate(_one("InclineBlock", mass=2.0, angle=30.0))
    assert r.value("e.block.acceleration", 1.0) == pytest.approx(G * 0.5, rel=1e-9)
    th = math.radians(40)
    r = A.simulate(_one("InclineBlock", mass=2.0, angle=40.0, mu_k=0.3, mu_s=0.35))
    assert r.value("e.block.acceleration", 1.0) == pytest.approx(
        G * (math.sin(th) - 0.3 * math.cos(th)), rel=1e-9
    )
    # tan(20 deg) = 0.36 <= mu_s: no motion.
    r = A.simulate(_one("InclineBlock", mass=2.0, angle=20.0, mu_k=0.3, mu_s=0.4))
    assert r.value("e.block.velocity", 2.0) == 0.0
    assert r.value("e.block.displacement", 2.0) == 0.0


def test_atwood_acceleration_and_tension():
    r = A.simulate(_pair("HangingMass", {"mass": 3.0}, "HangingMass", {"mass": 1.0}))
    assert (
        components(_pair("HangingMass", {"mass": 3.0}, "HangingMass", {"mass": 1.0}))[0].family
        == "atwood"
    )
    assert r.value("a.mass.acceleration", 1.0) == pytest.approx(G * 2 / 4, rel=1e-12)
    assert r.value("string_0.tension", 1.0) == pytest.approx(2 * 3 * 1 * G / 4, rel=1e-12)
    assert r.value("string_0.tension", 1.0) == pytest.approx(14.715, rel=1e-12)
    # The heavier mass goes down.
    assert r.series("a.mass.velocity")[-1][2] < 0 < r.series("b.mass.velocity")[-1][2]


def test_table_pulley_friction():
    r = A.simulate(_pair("TableBlock", {"mass": 2.0, "mu_k": 0.2}, "HangingMass", {"mass": 1.0}))
    a = (1.0 - 0.2 * 2.0) * G / 3.0
    assert r.value("a.block.acceleration", 1.5) == pytest.approx(a, rel=1e-12)
    assert r.value("string_0.tension", 1.5) == pytest.approx(1.0 * (G - a), rel=1e-12)


def test_collision_momentum_and_energy():
    m1, m2, v1, v2, e = 2.0, 3.0, 4.0, -1.0, 0.6
    r = A.simulate(_one("CollisionPair", mass_1=m1, mass_2=m2, velocity_1=v1, velocity_2=v2,
                        gap=1.0, restitution=e))  # fmt: skip
    p0 = m1 * v1 + m2 * v2
    w1 = r.series("e.block_1.velocity")[-1][0]
    w2 = r.series("e.block_2.velocity")[-1][0]
    assert m1 * w1 + m2 * w2 == pytest.approx(p0, rel=1e-9)
    vc = p0 / (m1 + m2)
    ke_before = 0.5 * m1 * (v1 - vc) ** 2 + 0.5 * m2 * (v2 - vc) ** 2
    ke_after = 0.5 * m1 * (w1 - vc) ** 2 + 0.5 * m2 * (w2 - vc) ** 2
    assert ke_after / ke_before == pytest.approx(e * e, rel=1e-9)


def test_spring_period():
    m, k = 0.8, 20.0
    r = A.simulate(_one("SpringBlockEntity", mass=m, stiffness=k, amplitude=0.3), duration=4.0)
    x = r.series("e.block.position")[:, 0]
    # Period from successive upward zero crossings (linear interpolation).
    idx = np.flatnonzero((x[:-1] < 0) & (x[1:] >= 0))
    tc = r.time[idx] - x[idx] * (r.time[idx + 1] - r.time[idx]) / (x[idx + 1] - x[idx])
    assert np.diff(tc).mean() == pytest.approx(2 * math.pi * math.sqrt(m / k), rel=1e-3)


def test_pendulum_rk4_small_angle_period_and_energy():
    L = 1.0
    r = A.simulate(_one("PendulumEntity", mass=1.0, length=L, angle=5.0), duration=4.0)
    ke = r.series("e.bob.kinetic_energy")[:, 0]
    pe = r.series("e.bob.potential_energy_change")[:, 0]
    assert np.max(np.abs(ke + pe)) < 1e-9  # RK4 conserves energy to this level at dt 1e-3
    th = np.arcsin(r.series("e.bob.position")[:, 0] / L)
    idx = np.flatnonzero((th[:-1] < 0) & (th[1:] >= 0))
    period = np.diff(r.time[idx]).mean()
    assert period == pytest.approx(2 * math.pi * math.sqrt(L / G), rel=2e-3)


# -- MuJoCo parity -----------------------------------------------------------------------------
PARITY_SCENES = {
    "constant_force": _one("DirectedMass", mass=2.0, force=5.0),
    "incline": _one("InclineBlock", mass=2.0, angle=35.0, mu_k=0.2, mu_s=0.25),
    "atwood": _pair("HangingMass", {"mass": 3.0}, "HangingMass", {"mass": 1.0}),
    "table_pulley": _pair("TableBlock", {"mass": 2.0, "mu_k": 0.2}, "HangingMass", {"mass": 1.0}),
    "incline_pulley": _pair("InclineBlock", {"mass": 2.0, "angle": 30.0, "mu_k": 0.1},
                            "HangingMass", {"mass": 2.0}),
    "projectile": _one("ThrowingMotionEntity", mass=1.0, height=2.0, speed=4.0, angle=45.0,
                       restitution=0.7),
    "collision1d": _one("CollisionPair", mass_1=2.0, mass_2=1.0, velocity_1=3.0, velocity_2=-1.0,
                        gap=1.3, restitution=0.5),
    "spring_mass": _one("SpringBlockEntity", mass=0.5, stiffness=30.0, amplitude=0.2),
    "pendulum": _one("PendulumEntity", mass=1.0, length=0.8, angle=60.0),
    # The seven later families: the off-centre axle (RK4 in both engines), an oblique hit,
    # a rocket with a delayed liftoff and its burnout inside the run, a charge in both fields.
    "spring_incline": _one("SpringMassPlaneEntity", mass=0.8, stiffness=40.0, angle=30.0),
    "rigid_rotation": _one("RigidRotationEntity", mass=1.5, radius=0.2, torque=2.0,
                           inertia_factor=0.4, offset=0.15, angle=30.0),
    "orbital": _one("OrbitalMotionEntity", mass=2.0, central_mass=10.0, radius=1.0, speed=2.6),
    "electromagnetic": _one("ElectroMagneticEntity", mass=0.5, charge=0.8, speed=2.0,
                            e_field=3.0, e_angle=30.0, b_field=1.5),
    "rocket": _one("RocketEntity", mass=1.0, fuel_mass=2.0, exhaust_speed=20.0, burn_rate=1.2),
    "movable_pulley": _one("MassWithMovablePulley", mass=3.0, counterweight=1.0),
    "complex_collision": _one("ComplexCollisionPlane", mass_1=2.0, mass_2=1.0, speed=3.0,
                              restitution=0.6, radius=0.1, gap=1.3, offset=0.12),
}  # fmt: skip


@pytest.mark.parametrize("family", sorted(PARITY_SCENES))
def test_mujoco_parity(family):
    """MuJoCo (RK4, dt 1e-3) and the analytic engine agree to rel 1e-3 on every attribute."""
    pytest.importorskip("mujoco")
    from sim2reason.mujoco_engine import MuJoCoEngine

    scene = PARITY_SCENES[family]
    ra, rm = A.simulate(scene), MuJoCoEngine().simulate(scene)
    assert set(ra.families.values()) == {family}
    assert set(ra.attributes()) == set(rm.attributes())
    for attr in ra.attributes():
        for t in (0.5, 1.0, 1.37, 2.0):
            a, m = ra.value(attr, t), rm.value(attr, t)
            assert m == pytest.approx(a, rel=1e-3, abs=1e-6), (attr, t)
    if family == "atwood":
        # The joint-equality constraint force is the string tension 2 m1 m2 g / (m1 + m2).
        assert rm.value("string_0.tension", 1.0) == pytest.approx(14.715, rel=1e-3)
    if family == "movable_pulley":
        # q_cw = 2 q_load as a joint equality: its force is the tension 3 m M g / (m + 4 M).
        assert rm.value("e.rope.tension", 1.0) == pytest.approx(9 * G / 7, rel=1e-3)


def _bouncing_ball_sample(e: Entity, ti: float) -> list[float]:
    """One recorded row of a projectile with restitution bounces at time ``ti``: walk the
    flights from the start (each lasts until the ball reaches the ground), then evaluate."""
    m, h, v0 = e.param("mass"), e.param("height"), e.param("speed")
    ang, rest = math.radians(e.param("angle")), e.param("restitution")
    px, py, pz = e.position
    vx = v0 * math.cos(ang)
    t0, z, vz, g = 0.0, h, v0 * math.sin(ang), G
    while True:
        if z <= 0.0 and vz <= 1e-9:  # resting on the ground
            z, vz, g = 0.0, 0.0, 0.0
            break
        tau = (vz + math.sqrt(vz * vz + 2 * G * max(z, 0.0))) / G
        if ti < t0 + tau:
            break
        t0 += tau
        vz, z = rest * (G * tau - vz), 0.0
        if vz < 1e-6:
            vz = 0.0
    d = ti - t0
    zz, vv, a = pz + z + vz * d - 0.5 * g * d * d, vz - g * d, -g if g else 0.0
    return [px + vx * ti, py, zz, vx, 0.0, vv, 0.0, 0.0, a, m * vx, 0.0, m * vv, 0.0, 0.0,
            m * a, 0.5 * m * (vx * vx + vv * vv), m * G * (zz - pz - h)]  # fmt: skip


def _per_sample_reference(scene: Scene, t: np.ndarray) -> dict[str, np.ndarray]:
    """Scalar, sample-by-sample recording of constant-acceleration string/pushed bodies,
    springs and bouncing projectiles (the straightforward loop the vectorised engine
    replaces)."""
    from sim2reason.engines import chain_bodies, solve_string_chain

    out: dict[str, list] = {}
    for c in components(scene):
        if c.family == "projectile":
            e = c.entities[0]
            out[f"{e.name}.ball"] = [_bouncing_ball_sample(e, float(ti)) for ti in t]
            continue
        if c.family == "spring_mass":
            e = c.entities[0]
            m, k, amp = e.param("mass"), e.param("stiffness"), e.param("amplitude")
            w = math.sqrt(k / m)
            rows = []
            for ti in t:
                x = amp * math.cos(w * ti)
                v = -amp * w * math.sin(w * ti)
                a = -w * w * x
                px, py, pz = e.position
                rows.append([px + x, py, pz, v, 0, 0, a, 0, 0, m * v, 0, 0, m * a, 0, 0,
                             0.5 * m * v * v, 0.5 * k * (x * x - amp * amp)])  # fmt: skip
            out[f"{e.name}.block"] = rows
            continue
        if c.family == "constant_force":
            e = c.entities[0]
            items = [
                (e, e.param("mass"), np.array([1.0, 0.0, 0.0]), e.param("force") / e.param("mass"))
            ]
        else:
            bodies = chain_bodies(c.entities)
            a, _, _ = solve_string_chain(bodies)
            items = [(b.entity, b.mass, b.direction, a) for b in bodies]
        for e, m, u, a in items:
            rows = []
            for ti in t:
                s, v = 0.5 * a * ti * ti, a * ti
                pos = np.asarray(e.position) + s * u
                vel, acc = v * u, a * u
                rows.append([*pos, *vel, *acc, *(m * vel), *(m * acc), 0.5 * m * v * v,
                             m * G * s * u[2]])  # fmt: skip
            out[f"{e.name}.{'block' if e.type != 'HangingMass' else 'mass'}"] = rows
    return {k: np.array(v, dtype=float) for k, v in out.items()}


def test_vectorised_recording_matches_per_sample_loop():
    from sim2reason.engines import BODY_COLUMNS

    chain = Scene("c", [Entity("a", "InclineBlock", (0.0, 0.0, 0.0),
                               {"mass": 2.0, "angle": 30.0, "mu_k": 0.1, "mu_s": 0.15}),
                        Entity("b", "TableBlock", (0.0, 10.0, 0.0), {"mass": 1.0, "mu_k": 0.2}),
                        Entity("c", "HangingMass", (0.0, 20.0, 0.0), {"mass": 4.0}),
                        Entity("d", "DirectedMass", (0.0, 30.0, 0.0), {"mass": 3.0, "force": -7.0}),
                        Entity("s", "SpringBlockEntity", (0.0, 40.0, 0.0),
                               {"mass": 1.5, "stiffness": 20.0, "amplitude": 0.3}),
                        # Six bounces, then resting contact from t = 1.056 s.
                        Entity("p", "ThrowingMotionEntity", (1.0, 50.0, 0.5),
                               {"mass": 0.7, "height": 1.2, "speed": 3.0, "angle": 50.0,
                                "restitution": 0.2})],
                  [Tendon([TendonEnd("a"), TendonEnd("b")]),
                   Tendon([TendonEnd("b"), TendonEnd("c")])])  # fmt: skip
    for every in (1, 7, 100):
        rec = AnalyticEngine(record_every=every).simulate(chain)
        ref = _per_sample_reference(chain, rec.time)
        assert set(ref) <= set(rec.bodies)
        for body, arr in ref.items():
            for q, (i, w) in BODY_COLUMNS.items():
                np.testing.assert_allclose(rec.bodies[body][q], arr[:, i : i + w], rtol=1e-12,
                                           atol=1e-12, err_msg=f"{body}.{q} every={every}")  # fmt: skip
    # Coarser recordings are the fine one's samples.
    fine, coarse = (
        AnalyticEngine().simulate(chain),
        AnalyticEngine(record_every=100).simulate(chain),
    )
    for attr in fine.attributes():
        np.testing.assert_allclose(coarse.series(attr), fine.series(attr)[::100], rtol=1e-12,
                                   atol=1e-12)  # fmt: skip
