"""``sim2reason bench``: engine speed side by side, QA/s with the shortcut filter as the
entity count k grows, reward checks/s, 1,000 scenes to filtered QA on 2 workers, and (with
``--grpo``) GRPO step time and peak memory at beta 0 vs 0.001. Writes a table, JSON and a plot.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any


def _rate(fn: Any, items: list[Any], min_seconds: float = 0.5) -> float:
    for it in items:  # warm-up (first-use imports and caches)
        fn(it)
    n, t0 = 0, time.perf_counter()
    while True:
        for it in items:
            fn(it)
        n += len(items)
        el = time.perf_counter() - t0
        if el >= min_seconds:
            return n / el


def bench_engines(quick: bool = False) -> list[dict[str, Any]]:
    from sim2reason.dsl import Entity, Scene
    from sim2reason.engines import AnalyticEngine

    rows = []
    fam_scenes = {
        "constant_force (closed form)": Scene("c", [Entity("b", "DirectedMass", parameters={"mass": 2.0, "force": 3.0})]),
        "projectile (closed form, bounces)": Scene("p", [Entity("b", "ThrowingMotionEntity", parameters={"mass": 1.0, "height": 2.0, "speed": 3.0, "angle": 30.0, "restitution": 0.8})]),
        "pendulum (RK4)": Scene("d", [Entity("b", "PendulumEntity", parameters={"mass": 1.0, "length": 1.0, "angle": 30.0})]),
        "rigid_rotation, offset axle (RK4)": Scene("r", [Entity("b", "RigidRotationEntity", parameters={"mass": 2.0, "radius": 0.3, "torque": 1.0, "offset": 0.1, "angle": 30.0})]),
        "complex_collision (closed form)": Scene("x", [Entity("b", "ComplexCollisionPlane", parameters={"mass_1": 1.0, "mass_2": 2.0, "speed": 3.0, "restitution": 0.7, "offset": 0.05})]),
        "movable_pulley (closed form)": Scene("m", [Entity("b", "MassWithMovablePulley", parameters={"mass": 3.0, "counterweight": 1.0})]),
        "spring_incline (closed form)": Scene("s", [Entity("b", "SpringMassPlaneEntity", parameters={"mass": 1.0, "stiffness": 20.0, "angle": 30.0})]),
        "orbital (RK4)": Scene("o", [Entity("b", "OrbitalMotionEntity", parameters={"mass": 1.0, "central_mass": 20.0, "radius": 2.0, "speed": 3.0})]),
        "rocket (closed form)": Scene("k", [Entity("b", "RocketEntity", parameters={"mass": 1.0, "fuel_mass": 1.0, "exhaust_speed": 60.0, "burn_rate": 0.8})]),
        "electromagnetic (closed form)": Scene("e", [Entity("b", "ElectroMagneticEntity", parameters={"mass": 1.0, "charge": 2.0, "speed": 1.0, "e_field": 1.0, "e_angle": 30.0, "b_field": 1.5})]),
    }  # fmt: skip
    try:
        from sim2reason.mujoco_engine import MuJoCoEngine

        mj: Any = MuJoCoEngine()
    except Exception:
        mj = None
    for record_every, label in ((1, "every step"), (100, "every 0.1 s")):
        an = AnalyticEngine(record_every=record_every)
        for name, scene in fam_scenes.items():
            r = _rate(an.simulate, [scene], 0.3 if quick else 1.0)
            row = {"bench": "engine", "family": name, "recording": label, "analytic_scenes_s": r}
            if mj is not None and record_every == 1:
                m = _rate(mj.simulate, [scene], 0.3 if quick else 1.0)
                row["mujoco_scenes_s"] = m
                row["mujoco_steps_s"] = m * 2000
            rows.append(row)
    return rows


def bench_filter(quick: bool = False) -> list[dict[str, Any]]:
    from sim2reason.dsl import Entity, Scene
    from sim2reason.engines import AnalyticEngine
    from sim2reason.filters import shortcut_filter
    from sim2reason.qa import generate_qa

    eng = AnalyticEngine(record_every=10)
    rows = []
    for k in (1, 2, 3, 4, 5, 6):
        ents = [Entity(f"b{i}", "DirectedMass", (0.0, 10.0 * i, 0.0), {"mass": 1.0 + i, "force": 2.0})
                for i in range(k)]  # fmt: skip
        scene = Scene(f"k{k}", ents)
        rec = eng.simulate(scene)
        qas = generate_qa(scene, rec, "numeric", 10, random.Random(0))
        t0 = time.perf_counter()
        reps = 3 if quick else 10
        for _ in range(reps):
            shortcut_filter(qas, scene, eng)
        el = (time.perf_counter() - t0) / reps
        rows.append({"bench": "filter", "k": k, "children": 2**k - 2, "qa_per_s": len(qas) / el})
    return rows


def bench_rewards(quick: bool = False) -> list[dict[str, Any]]:
    from sim2reason.rewards import check_answer

    rng = random.Random(0)
    plain = [(f"\\boxed{{{rng.uniform(0, 100):.3f}}}", rng.uniform(0, 100)) for _ in range(500)]
    latex = [(r"\boxed{\frac{3}{4} \times 10^{2} \text{ m}}", 75.0)] * 200
    out = []
    for name, items in (("plain boxed numbers", plain), ("LaTeX with units", latex)):
        r = _rate(lambda it: check_answer(it[0], it[1]), items, 0.3 if quick else 1.0)
        out.append({"bench": "reward", "case": name, "checks_per_s": r})
    return out


def bench_pipeline(quick: bool = False) -> list[dict[str, Any]]:
    from sim2reason.generate import generate_scenes
    from sim2reason.pipeline import scenes_to_qa

    types = ["BasicPulley", "IntermediatePulley", "BasicInclinedPlaneFriction",
             "IntermediateHybrid", "BasicCollision", "SpringBlockSystems", "DifficultProjectile",
             "Rotation", "AdvancedInclinedPlaneFriction", "IntermediateInclinedPlaneFriction"]  # fmt: skip
    n = 10 if quick else 100
    scenes = generate_scenes(types, n, seed=0)
    t0 = time.perf_counter()
    res = scenes_to_qa(scenes, per_scene=10, workers=2)
    el = time.perf_counter() - t0
    return [{"bench": "pipeline", "scenes": len(scenes), "workers": 2, "seconds": el,
             "generated": res.generated, "kept": len(res.qas)}]  # fmt: skip


def bench_grpo(steps: int = 3) -> list[dict[str, Any]]:
    """GRPO step time (generation / reward / update are logged by trl as a whole step here)
    and peak RSS at beta 0 vs 0.001 on the CPU arm's model."""
    import resource

    from sim2reason.arm import ArmConfig, _rl_dataset, build_warm_start, claim_data
    from sim2reason.train import grpo_config, train_grpo

    rows = []
    cfg = ArmConfig()
    data = claim_data()
    for beta in (0.0, 0.001):
        model, tok = build_warm_start(cfg).load()
        ds = _rl_dataset(tok, data.rl[:64])
        g = grpo_config("tiny", max_steps=steps, beta=beta)
        t0 = time.perf_counter()
        model = train_grpo(model, tok, ds, None, g)
        el = time.perf_counter() - t0
        hist = [h for h in model.sim2reason_log_history if "reward" in h]
        rows.append({"bench": "grpo", "beta": beta, "seconds_per_step": el / steps,
                     "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                     "reward_mean": sum(h["reward"] for h in hist) / max(1, len(hist))})  # fmt: skip
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    lines = []
    for r in rows:
        cells = [f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()]
        lines.append(" | ".join(cells))
    return "\n".join(lines)


def run_bench(out: str | Path = "sim2reason-bench", *, quick: bool = False, plot: bool = True,
              grpo: bool = False) -> list[dict[str, Any]]:  # fmt: skip
    rows = bench_engines(quick) + bench_filter(quick) + bench_rewards(quick) + bench_pipeline(quick)
    if grpo:
        rows += bench_grpo()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(rows, indent=2))
    table = _table(rows)
    (out / "bench.txt").write_text(table + "\n")
    print(table)
    if plot:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("matplotlib not installed (extra 'plot'): no plot written")
            return rows
        f = [r for r in rows if r["bench"] == "filter"]
        fig, ax = plt.subplots(figsize=(4, 3))
        ax.semilogy([r["k"] for r in f], [r["qa_per_s"] for r in f], "o-")
        ax.set_xlabel("entities k (2^k - 2 child scenes)")
        ax.set_ylabel("filtered QA / s")
        fig.tight_layout()
        fig.savefig(out / "filter_qa_per_s.png", dpi=120)
    return rows
