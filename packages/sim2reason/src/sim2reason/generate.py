"""Scene randomisation: 19 scene types, each sampling a tendon graph of entities.

Follows the paper's generator (Sec. 3.1): draw the entity count from the type's range, grow
the graph breadth-first over open string ends (stop at the count or at two tendons, closing
deeper strings with a closing entity), place entities along y in steps of 10, and sample
each entity's dynamics-relevant parameters from its difficulty table, rounded to 2 decimals.
Every scene is seeded on its own (``seed`` and the scene index), so one scene can be
regenerated without the others.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sim2reason.dsl import ENTITY_TYPES, Entity, Scene, Tendon, TendonEnd, validate
from sim2reason.errors import ConfigError

__all__ = [
    "DIFFICULTIES",
    "SCENE_TYPES",
    "SceneGenerator",
    "SceneType",
    "generate_scenes",
    "sample_parameters",
]

DIFFICULTIES = ("EASY", "MEDIUM", "HARD")


@dataclass(frozen=True)
class SceneType:
    """One row of the generator table."""

    name: str
    entity_range: tuple[int, int]
    possible_entities: tuple[str, ...]
    closing_entities: tuple[str, ...] = ()
    analytic: bool = True
    """True when every entity it can draw has an engine here (the CPU families)."""
    category: str = "pulley"
    """Question menu (:data:`sim2reason.qa.QUANTITIES`) its scenes use."""


_STRING_ENTS = ("HangingMass", "TableBlock")
SCENE_TYPES: dict[str, SceneType] = {
    s.name: s
    for s in [
        SceneType("BasicPulley", (1, 2), _STRING_ENTS, ("HangingMass",)),
        SceneType("IntermediatePulley", (2, 3), (*_STRING_ENTS, "InclineBlock"), ("HangingMass",)),
        SceneType("BasicInclinedPlaneFriction", (1, 1), ("InclineBlock",)),
        SceneType("IntermediateInclinedPlaneFriction", (2, 3), ("InclineBlock", "TableBlock"),
                  ("HangingMass",)),
        SceneType("AdvancedInclinedPlaneFriction", (3, 3), ("InclineBlock", "TableBlock"),
                  ("HangingMass",)),
        SceneType("IntermediateHybrid", (2, 3), (*_STRING_ENTS, "InclineBlock", "DirectedMass"),
                  ("HangingMass",)),
        SceneType("AdvancedHybrid", (3, 4), (*_STRING_ENTS, "InclineBlock", "DirectedMass"),
                  ("HangingMass",)),
        SceneType("Rotation", (1, 1), ("PendulumEntity",), category="rotation"),
        SceneType("RigidBodyRotation", (1, 1), ("RigidRotationEntity",),
                  category="rotation"),
        SceneType("BasicCollision", (1, 1), ("CollisionPair",), category="collision"),
        SceneType("IntermediateCollision", (1, 1), ("CollisionPair",), category="collision"),
        SceneType("AdvancedCollision", (1, 1), ("ComplexCollisionPlane",),
                  category="collision"),
        SceneType("SpringBlockSystems", (1, 1), ("SpringBlockEntity",), category="spring"),
        SceneType("DifficultPulley", (1, 1), ("MassWithMovablePulley",)),
        SceneType("DifficultSpringMass", (1, 1), ("SpringMassPlaneEntity",),
                  category="spring"),
        SceneType("DifficultOrbitalMotion", (1, 1), ("OrbitalMotionEntity",),
                  category="orbital"),
        SceneType("DifficultRocket", (1, 1), ("RocketEntity",),
                  category="orbital"),
        SceneType("DifficultProjectile", (1, 1), ("ThrowingMotionEntity",),
                  category="projectile"),
        SceneType("DifficultElectroMagnetic", (1, 1), ("ElectroMagneticEntity",),
                  category="orbital"),
    ]
}  # fmt: skip

Sampler = Callable[[random.Random], float]


def _u(lo: float, hi: float) -> Sampler:
    return lambda r: round(r.uniform(lo, hi), 2)


def _c(*vals: float) -> Sampler:
    return lambda r: float(r.choice(vals))


def _signed(lo: float, hi: float) -> Sampler:
    return lambda r: round(r.choice((-1, 1)) * r.uniform(lo, hi), 2)


# Parameter tables per entity type and difficulty (EASY, MEDIUM, HARD).
_TABLE: dict[str, dict[str, tuple[Sampler, Sampler, Sampler]]] = {
    "DirectedMass": {"mass": (_u(1, 5), _u(0.5, 10), _u(0.1, 20)),
                     "force": (_u(1, 10), _u(-20, 20), _u(-50, 50))},
    "HangingMass": {"mass": (_u(1, 5), _u(0.5, 10), _u(0.1, 20))},
    "TableBlock": {"mass": (_u(1, 5), _u(0.5, 10), _u(0.1, 20)),
                   "mu_k": (_c(0.0), _u(0, 0.3), _u(0, 0.6))},
    "InclineBlock": {"mass": (_u(1, 5), _u(0.5, 10), _u(0.1, 20)),
                     "angle": (_c(30, 45, 60), _u(15, 60), _u(5, 85)),
                     "mu_k": (_c(0.0), _u(0, 0.3), _u(0, 0.6))},
    "ThrowingMotionEntity": {"mass": (_u(0.5, 2), _u(0.5, 5), _u(0.1, 10)),
                             "angle": (_c(0, 90, -90), _c(-60, -45, -30, 30, 45, 60), _u(10, 80)),
                             "height": (_u(1, 2), _u(1, 3), _u(1, 5)),
                             "speed": (_u(1, 3), _u(2, 5), _u(3, 10)),
                             "restitution": (_c(1.0), _u(0, 1), _u(0, 1))},
    "CollisionPair": {"mass_1": (_u(1, 5), _u(0.5, 10), _u(0.1, 20)),
                      "mass_2": (_u(1, 5), _u(0.5, 10), _u(0.1, 20)),
                      "velocity_1": (_u(1, 5), _u(1, 10), _u(-10, 10)),
                      "velocity_2": (_c(0.0), _u(-5, 0), _u(-10, 10)),
                      "gap": (_u(0.5, 2), _u(0.5, 3), _u(0.5, 5)),
                      "restitution": (_c(1.0, 0.0), _u(0, 1), _u(0, 1))},
    "SpringBlockEntity": {"mass": (_u(0.5, 2), _u(0.5, 5), _u(0.1, 10)),
                          "stiffness": (_u(10, 50), _u(5, 100), _u(1, 500)),
                          "amplitude": (_u(0.1, 0.5), _u(-1, 1), _u(-2, 2))},
    "PendulumEntity": {"mass": (_u(0.5, 2), _u(0.5, 5), _u(0.1, 10)),
                       "length": (_u(0.5, 2), _u(0.2, 3), _u(0.1, 5)),
                       "angle": (_u(5, 15), _u(10, 60), _u(10, 170))},
    "RigidRotationEntity": {"mass": (_u(1, 3), _u(0.5, 5), _u(0.1, 10)),
                            "radius": (_u(0.1, 0.3), _u(0.1, 0.5), _u(0.05, 0.8)),
                            "torque": (_u(0.5, 5), _u(-5, 5), _u(-10, 10)),
                            "inertia_factor": (_c(0.5, 1.0), _c(0.5, 1.0, 0.4),
                                               _c(0.5, 1.0, 0.4, 0.33)),
                            "offset": (_c(0.0), _u(0, 0.3), _u(0, 0.8)),
                            "angle": (_c(0.0), _c(0, 30, 60, 90), _u(-170, 170))},
    "ComplexCollisionPlane": {"mass_1": (_u(1, 5), _u(0.5, 10), _u(0.1, 20)),
                              "mass_2": (_u(1, 5), _u(0.5, 10), _u(0.1, 20)),
                              "speed": (_u(1, 5), _u(1, 10), _u(1, 10)),
                              "restitution": (_c(1.0, 0.0), _u(0, 1), _u(0, 1)),
                              "radius": (_u(0.05, 0.2),) * 3,
                              "gap": (_u(0.5, 2), _u(0.5, 3), _u(0.5, 5)),
                              "offset": (_c(0.0), _u(-0.09, 0.09), _u(-0.09, 0.09))},
    "SpringMassPlaneEntity": {"mass": (_u(0.5, 2), _u(0.5, 5), _u(0.1, 10)),
                              "stiffness": (_u(10, 50), _u(5, 100), _u(1, 500)),
                              "angle": (_c(30, 45, 60), _u(15, 60), _u(5, 85))},
    "MassWithMovablePulley": {"mass": (_u(1, 5), _u(0.5, 10), _u(0.1, 20)),
                              "counterweight": (_u(1, 5), _u(0.5, 10), _u(0.1, 20))},
    "OrbitalMotionEntity": {"mass": (_u(0.5, 3), _u(0.1, 5), _u(0.1, 10)),
                            "central_mass": (_u(10, 50), _u(5, 50), _u(1, 100)),
                            "radius": (_u(1, 2), _u(1, 5), _u(1, 10)),
                            "central_radius": (_c(0.1),) * 3},
    "RocketEntity": {"mass": (_u(0.5, 2),) * 3,
                     "fuel_mass": (_u(0.2, 1), _u(0.2, 2), _u(0.1, 3)),
                     "burn_rate": (_u(0.1, 0.5), _u(0.05, 0.5), _u(0.02, 0.5))},
    "ElectroMagneticEntity": {"mass": (_u(0.5, 1.5),) * 3,
                              "charge": (_signed(1, 3),) * 3,
                              "speed": (_u(0.5, 3),) * 3,
                              "e_field": (_u(0.1, 2),) * 3,
                              "e_angle": (_u(0, 360),) * 3,
                              "b_field": (_u(0.1, 2),) * 3},
}  # fmt: skip

_DIFF_INDEX = {d: i for i, d in enumerate(DIFFICULTIES)}


def sample_parameters(entity_type: str, rng: random.Random, difficulty: str) -> dict[str, float]:
    """Draw one entity's parameters from its difficulty table (2 decimals)."""
    i = _DIFF_INDEX[difficulty]
    params = {k: v[i](rng) for k, v in _TABLE[entity_type].items()}
    if "mu_k" in params and params["mu_k"] > 0:
        params["mu_s"] = round(params["mu_k"] + rng.uniform(0.0, 0.1), 2)
    if entity_type == "OrbitalMotionEntity":
        # Launch speed near the circular one, sqrt(G M / r) with G = 1 (never into the body).
        f = (1.0, rng.uniform(0.8, 1.2), rng.uniform(0.6, 1.3))[i]
        params["speed"] = round(f * (params["central_mass"] / params["radius"]) ** 0.5, 2)
    if entity_type == "RocketEntity":
        # Exhaust speed from a thrust-to-weight ratio at ignition (HARD may wait on the pad).
        twr = (rng.uniform(2.0, 3.0), rng.uniform(1.2, 3.0), rng.uniform(0.8, 3.0))[i]
        m0 = params["mass"] + params["fuel_mass"]
        params["exhaust_speed"] = round(twr * m0 * 9.81 / params["burn_rate"], 2)
    if entity_type == "ElectroMagneticEntity" and difficulty != "HARD":
        # Single-field modes (uniform electric or magnetic); HARD keeps both (E x B drift).
        params["b_field" if rng.random() < 0.5 else "e_field"] = 0.0
    return params


class SceneGenerator:
    """Random scenes of one type; ``generate(i)`` is deterministic in ``(seed, i)``."""

    def __init__(self, scene_type: str, difficulty: str | None = None, seed: int = 0) -> None:
        if scene_type not in SCENE_TYPES:
            raise ConfigError(f"scene_type={scene_type!r}: known types {sorted(SCENE_TYPES)}")
        if difficulty is not None and difficulty not in DIFFICULTIES:
            raise ConfigError(f"difficulty={difficulty!r}: use one of {DIFFICULTIES} or None")
        self.spec = SCENE_TYPES[scene_type]
        self.difficulty = difficulty
        self.seed = seed
        self._count = 0

    def generate(self, index: int | None = None) -> Scene:
        """Scene number ``index`` (the next one when omitted) of this generator's stream."""
        if index is None:
            index, self._count = self._count, self._count + 1
        rng = random.Random(f"{self.seed}:{self.spec.name}:{index}")
        diff = self.difficulty or rng.choice(DIFFICULTIES)
        lo, hi = self.spec.entity_range
        n = rng.randint(lo, hi)
        ents: list[Entity] = []
        tendons: list[Tendon] = []
        # Open string ends: (entity name, depth) waiting for a partner.
        open_ends: list[tuple[str, int]] = []

        def add(etype: str) -> Entity:
            ent = Entity(
                name=f"{_SHORT[etype]}{len(ents)}",
                type=etype,
                position=(0.0, 10.0 * len(ents), 0.0),
                parameters=sample_parameters(etype, rng, diff),
            )
            ents.append(ent)
            return ent

        first = add(rng.choice(self.spec.possible_entities))
        open_ends += [(first.name, 0)] * ENTITY_TYPES[first.type].ends
        if not open_ends:
            # Entities without string ends are independent: add them side by side.
            while len(ents) < n:
                add(rng.choice(self.spec.possible_entities))
        while open_ends and len(ents) < n and len(tendons) < 2:
            owner, depth = open_ends.pop(0)
            remaining = n - len(ents)
            pool = [e for e in self.spec.possible_entities if ENTITY_TYPES[e].ends > 0]
            if remaining == 1 or depth >= 1 or not pool:
                pool = list(self.spec.closing_entities or pool)
            # Middle entities need a second end; an end entity has exactly one.
            choices = [e for e in pool if ENTITY_TYPES[e].ends >= 1]
            if not choices:
                break
            etype = rng.choice(choices)
            ent = add(etype)
            tendons.append(Tendon([TendonEnd(owner, "inner_to_outer"),
                                   TendonEnd(ent.name, "outer_to_inner")]))  # fmt: skip
            if ENTITY_TYPES[etype].ends > 1 and len(ents) < n:
                open_ends.append((ent.name, depth + 1))
            # A chain grows from its ends: an entity's second end is only used by the chain.
            open_ends = [(o, d) for o, d in open_ends if o != owner]
        while len(ents) < n:
            # Remaining entities are independent of the chain (e.g. a pushed block).
            add(rng.choice([e for e in self.spec.possible_entities if ENTITY_TYPES[e].ends == 0]
                           or ["DirectedMass"]))  # fmt: skip
        scene = Scene(name=f"{self.spec.name}_{self.seed}_{index}", entities=ents,
                      connections=tendons, tag=f"{self.spec.name}/{diff}")  # fmt: skip
        return validate(scene)


_SHORT = {
    "DirectedMass": "block",
    "HangingMass": "mass",
    "TableBlock": "cart",
    "InclineBlock": "slider",
    "ThrowingMotionEntity": "ball",
    "CollisionPair": "pair",
    "SpringBlockEntity": "oscillator",
    "PendulumEntity": "pendulum",
    "RigidRotationEntity": "wheel",
    "ComplexCollisionPlane": "balls",
    "SpringMassPlaneEntity": "spring",
    "MassWithMovablePulley": "pulley",
    "OrbitalMotionEntity": "satellite",
    "RocketEntity": "rocket",
    "ElectroMagneticEntity": "particle",
}


def generate_scenes(
    types: Sequence[str] | str = "analytic", n: int = 10, seed: int = 0,
    difficulty: str | None = None,
) -> list[Scene]:  # fmt: skip
    """``n`` scenes per type (``"all"``, ``"analytic"`` or a list of type names)."""
    if isinstance(types, str):
        if types == "all":
            types = list(SCENE_TYPES)
        elif types == "analytic":
            types = [k for k, v in SCENE_TYPES.items() if v.analytic]
        else:
            types = [t.strip() for t in types.split(",") if t.strip()]
    if not isinstance(n, int) or n < 0:
        raise ConfigError(f"n={n!r}: must be a non-negative int")
    out = []
    for name in types:
        gen = SceneGenerator(name, difficulty, seed)
        out += [gen.generate(i) for i in range(n)]
    return out
