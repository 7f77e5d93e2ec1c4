"""Wall-clock targets (``perf`` tier, run serially): engines, parser, the 1,000-scene pipeline."""

from __future__ import annotations

import time

import pytest
from sim2reason.dsl import Entity, Scene
from sim2reason.engines import AnalyticEngine

pytestmark = pytest.mark.perf


def _per_s(fn, n):
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return n / (time.perf_counter() - t0)


def test_closed_form_scenes_per_s():
    eng = AnalyticEngine(record_every=100)  # one sample per 0.1 s
    s = Scene("c", [Entity("b", "DirectedMass", parameters={"mass": 2.0, "force": 3.0})])
    assert _per_s(lambda: eng.simulate(s), 2000) >= 1e4


def test_rk4_scenes_per_s():
    eng = AnalyticEngine(record_every=100)
    s = Scene(
        "p", [Entity("b", "PendulumEntity", parameters={"mass": 1, "length": 1, "angle": 30})]
    )
    assert _per_s(lambda: eng.simulate(s), 200) >= 200


def test_parser_checks_per_s():
    from sim2reason.rewards import check_answer

    assert _per_s(lambda: check_answer(r"\boxed{12.5}", 12.4), 5000) >= 5000


def test_thousand_scenes_to_filtered_qa_within_60_s():
    from sim2reason.generate import generate_scenes
    from sim2reason.pipeline import scenes_to_qa

    scenes = generate_scenes(["BasicPulley", "IntermediatePulley", "BasicInclinedPlaneFriction",
                              "IntermediateHybrid", "BasicCollision", "SpringBlockSystems",
                              "DifficultProjectile", "Rotation", "AdvancedInclinedPlaneFriction",
                              "IntermediateInclinedPlaneFriction"], 100, seed=0)  # fmt: skip
    t0 = time.perf_counter()
    res = scenes_to_qa(scenes, per_scene=10, workers=2)
    assert time.perf_counter() - t0 <= 60.0
    assert len(scenes) == 1000 and len(res.qas) > 1000
