"""The scene DSL: scenes as entities joined by tendons, read from and written to YAML.

A scene is ``{name, tag, entities: [{name, type, position, parameters}], connections:
[{tendon: [{entity, direction, connecting_point?}, ...], name?}]}`` (the paper's YAML scene
graph, Sec. 3.1). Every entity type declares its parameters with physical ranges, the bodies it
contributes to a recording and how many string ends it accepts; :func:`validate` checks a scene
against those declarations and raises :class:`~sim2reason.errors.SceneError` naming the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sim2reason.errors import SceneError, UnsupportedFamilyError

__all__ = [
    "ENTITY_TYPES",
    "Entity",
    "EntityType",
    "Param",
    "Scene",
    "Tendon",
    "TendonEnd",
    "dump_yaml",
    "load_yaml",
    "scene_from_dict",
    "scene_to_dict",
    "validate",
]


@dataclass(frozen=True)
class Param:
    """One entity parameter: its open/closed physical range and unit (for descriptions)."""

    lo: float
    hi: float
    unit: str = ""
    lo_open: bool = False
    hi_open: bool = False
    required: bool = True
    default: float | None = None
    """Value used when the parameter is optional and absent."""

    def check(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        lo_ok = value > self.lo if self.lo_open else value >= self.lo
        hi_ok = value < self.hi if self.hi_open else value <= self.hi
        return lo_ok and hi_ok

    def describe(self) -> str:
        lb = "(" if self.lo_open else "["
        rb = ")" if self.hi_open else "]"
        return f"{lb}{self.lo:g}, {self.hi:g}{rb}"


_MASS = Param(0.0, 1e4, "kg", lo_open=True)
_MU = Param(0.0, 2.0, required=False, default=0.0)


@dataclass(frozen=True)
class EntityType:
    """Declaration of an entity type: its dynamics family, parameters, bodies and string ends."""

    name: str
    family: str
    """The dynamics family an engine dispatches on (``"string"`` for entities that tendons
    join into one chain)."""
    params: dict[str, Param]
    bodies: tuple[str, ...]
    ends: int = 0
    """How many tendon ends may attach to it."""


ENTITY_TYPES: dict[str, EntityType] = {
    t.name: t
    for t in [
        EntityType("DirectedMass", "constant_force",
                   {"mass": _MASS, "force": Param(-1e4, 1e4, "N")}, ("block",)),
        EntityType("HangingMass", "string", {"mass": _MASS}, ("mass",), ends=1),
        EntityType("TableBlock", "string",
                   {"mass": _MASS, "mu_k": _MU, "mu_s": Param(0.0, 2.0, required=False)},
                   ("block",), ends=2),
        EntityType("InclineBlock", "string",
                   {"mass": _MASS, "angle": Param(0.0, 90.0, "deg", True, True), "mu_k": _MU,
                    "mu_s": Param(0.0, 2.0, required=False)},
                   ("block",), ends=2),
        EntityType("ThrowingMotionEntity", "projectile",
                   {"mass": _MASS, "height": Param(0.0, 1e3, "m"),
                    "speed": Param(0.0, 1e3, "m/s"), "angle": Param(-90.0, 90.0, "deg"),
                    "restitution": Param(0.0, 1.0, required=False, default=1.0)},
                   ("ball",)),
        EntityType("CollisionPair", "collision1d",
                   {"mass_1": _MASS, "mass_2": _MASS, "velocity_1": Param(-1e3, 1e3, "m/s"),
                    "velocity_2": Param(-1e3, 1e3, "m/s"), "gap": Param(0.0, 1e3, "m", True),
                    "restitution": Param(0.0, 1.0)},
                   ("block_1", "block_2")),
        EntityType("SpringBlockEntity", "spring_mass",
                   {"mass": _MASS, "stiffness": Param(0.0, 1e6, "N/m", True),
                    "amplitude": Param(-100.0, 100.0, "m")},
                   ("block",)),
        EntityType("PendulumEntity", "pendulum",
                   {"mass": _MASS, "length": Param(0.0, 1e3, "m", True),
                    "angle": Param(-179.0, 179.0, "deg")},
                   ("bob",)),
        # The other official scene types, one entity each (sim2reason.families).
        EntityType("RigidRotationEntity", "rigid_rotation",
                   {"mass": _MASS, "radius": Param(0.0, 100.0, "m", True),
                    "torque": Param(-1e4, 1e4, "N m"),
                    "inertia_factor": Param(0.0, 1.0, "", True, required=False, default=0.5),
                    "offset": Param(0.0, 100.0, "m", required=False, default=0.0),
                    "angle": Param(-180.0, 180.0, "deg", required=False, default=0.0)},
                   ("body",)),
        EntityType("ComplexCollisionPlane", "complex_collision",
                   {"mass_1": _MASS, "mass_2": _MASS, "speed": Param(0.0, 1e3, "m/s"),
                    "restitution": Param(0.0, 1.0),
                    "radius": Param(0.0, 100.0, "m", True, required=False, default=0.1),
                    "gap": Param(0.0, 1e3, "m", True, required=False, default=1.0),
                    "offset": Param(-1e3, 1e3, "m", required=False, default=0.0)},
                   ("ball_1", "ball_2")),
        EntityType("SpringMassPlaneEntity", "spring_incline",
                   {"mass": _MASS, "stiffness": Param(0.0, 1e6, "N/m", True),
                    "angle": Param(0.0, 90.0, "deg", True, True)}, ("block",)),
        EntityType("MassWithMovablePulley", "movable_pulley",
                   {"mass": _MASS, "counterweight": _MASS}, ("load", "counterweight")),
        EntityType("OrbitalMotionEntity", "orbital",
                   {"mass": _MASS, "central_mass": Param(0.0, 1e30, "kg", True),
                    "radius": Param(0.0, 1e12, "m", True), "speed": Param(0.0, 1e6, "m/s"),
                    "central_radius": Param(0.0, 1e12, "m", True, required=False,
                                            default=0.1)},
                   ("satellite",)),
        EntityType("RocketEntity", "rocket",
                   {"mass": _MASS, "fuel_mass": _MASS, "exhaust_speed": Param(0.0, 1e4, "m/s", True),
                    "burn_rate": Param(0.0, 1e3, "kg/s", True)}, ("rocket",)),
        EntityType("ElectroMagneticEntity", "electromagnetic",
                   {"mass": _MASS, "charge": Param(-100.0, 100.0, "C"),
                    "speed": Param(0.0, 1e6, "m/s"),
                    "e_field": Param(0.0, 1e6, "N/C", required=False, default=0.0),
                    "e_angle": Param(-360.0, 360.0, "deg", required=False, default=0.0),
                    "b_field": Param(-1e3, 1e3, "T", required=False, default=0.0)},
                   ("particle",)),
    ]
}  # fmt: skip

#: Official entity types that no engine here simulates: naming one in a scene raises
#: :class:`UnsupportedFamilyError` (with what it is) instead of the generic unknown-type error.
NOT_IMPLEMENTED: dict[str, str] = {
    "DiskRackWithSphereEntity": "the official disk-and-sphere rack entity",
}

_DIRECTIONS = ("inner_to_outer", "outer_to_inner")


@dataclass
class Entity:
    """One scene element (a block, a ball, a pendulum...) with its sampled parameters."""

    name: str
    type: str
    position: tuple[float, float, float] = (0.0, 0.0, 0.0)
    parameters: dict[str, float] = field(default_factory=dict)

    def param(self, key: str) -> float:
        """The parameter's value, or its declared default when optional and absent."""
        if key in self.parameters:
            return float(self.parameters[key])
        spec = ENTITY_TYPES[self.type].params[key]
        if key == "mu_s":
            return float(self.parameters.get("mu_k", 0.0))
        if spec.default is None:
            raise SceneError(f"entity {self.name!r}: parameters.{key} is missing")
        return float(spec.default)


@dataclass
class TendonEnd:
    """A string end attached to ``entity``."""

    entity: str
    direction: str = "inner_to_outer"
    connecting_point: int | None = None


@dataclass
class Tendon:
    """An inextensible massless string joining two entities over pulleys."""

    ends: list[TendonEnd]
    name: str = ""


@dataclass
class Scene:
    """A scene graph: entities joined by tendons (the DSL's ``scene`` mapping)."""

    name: str
    entities: list[Entity]
    connections: list[Tendon] = field(default_factory=list)
    tag: str = ""

    def __post_init__(self) -> None:
        for i, t in enumerate(self.connections):
            if not t.name:
                t.name = f"string_{i}"

    def entity(self, name: str) -> Entity:
        for e in self.entities:
            if e.name == name:
                return e
        raise KeyError(f"scene {self.name!r} has no entity {name!r}")

    def tendon_names(self) -> list[str]:
        return [t.name or f"string_{i}" for i, t in enumerate(self.connections)]


def validate(scene: Scene) -> Scene:
    """Check the schema: known types, unique names, tendon endpoints, parameter ranges.

    Raises :class:`SceneError` naming the offending field (``entities[1].parameters.mass`` ...).
    Returns the scene so calls chain.
    """
    if not isinstance(scene.name, str) or not scene.name:
        raise SceneError("scene.name must be a non-empty string")
    if not scene.entities:
        raise SceneError(f"scene {scene.name!r}: scene.entities is empty")
    seen: set[str] = set()
    isfinite = math.isfinite
    for i, ent in enumerate(scene.entities):
        # Error messages are built only on failure: this runs before every simulation.
        name = ent.name
        if not isinstance(name, str) or not name or "." in name:
            raise SceneError(f"entities[{i}].name={name!r}: need a non-empty name without dots")
        if name in seen:
            raise SceneError(f"entities[{i}].name={name!r}: duplicate entity name")
        seen.add(name)
        spec = ENTITY_TYPES.get(ent.type)
        if spec is None:
            if ent.type in NOT_IMPLEMENTED:
                raise UnsupportedFamilyError(
                    f"entities[{i}].type={ent.type!r}: {NOT_IMPLEMENTED[ent.type]} is not "
                    "implemented here (no engine simulates it); supported families: "
                    f"{', '.join(dict.fromkeys(t.family for t in ENTITY_TYPES.values()))} (entity "
                    f"types {sorted(ENTITY_TYPES)})"
                )
            raise SceneError(
                f"entities[{i}].type={ent.type!r}: unknown entity type; "
                f"known: {sorted(ENTITY_TYPES)}"
            )
        pos = ent.position
        if len(pos) == 3:
            x, y, z = pos
            ok = isfinite(float(x)) and isfinite(float(y)) and isfinite(float(z))
        else:
            ok = False
        if not ok:
            raise SceneError(f"entities[{i}].position={list(pos)!r}: need 3 finite numbers")
        params = ent.parameters
        if not params.keys() <= spec.params.keys():
            raise SceneError(
                f"entities[{i}].parameters: unknown {sorted(set(params) - set(spec.params))} "
                f"for {ent.type}; known {sorted(spec.params)}"
            )
        for key, p in spec.params.items():
            if key not in params:
                if p.required:
                    raise SceneError(f"entities[{i}].parameters.{key} is missing ({ent.type})")
                continue
            value = params[key]
            if value.__class__ is not float and (
                isinstance(value, bool) or not isinstance(value, int | float)
            ):
                raise SceneError(f"entities[{i}].parameters.{key}={value!r}: must be a number")
            if not p.check(float(value)):
                raise SceneError(
                    f"entities[{i}].parameters.{key}={value!r}: outside the physical range "
                    f"{p.describe()}{' ' + p.unit if p.unit else ''}"
                )
    if not scene.connections:
        return scene
    used: dict[str, int] = {}
    names: set[str] = set()
    for j, (tendon, tname) in enumerate(zip(scene.connections, scene.tendon_names(), strict=True)):
        where = f"connections[{j}]"
        if tname in names or tname in seen:
            raise SceneError(f"{where}.name={tname!r}: duplicate name")
        names.add(tname)
        if len(tendon.ends) != 2:
            raise SceneError(f"{where}.tendon: needs exactly 2 ends, got {len(tendon.ends)}")
        if tendon.ends[0].entity == tendon.ends[1].entity:
            raise SceneError(f"{where}.tendon: both ends on {tendon.ends[0].entity!r}")
        for k, end in enumerate(tendon.ends):
            if end.entity not in seen:
                raise SceneError(
                    f"{where}.tendon[{k}].entity={end.entity!r}: not in entities {sorted(seen)}"
                )
            if end.direction not in _DIRECTIONS:
                raise SceneError(
                    f"{where}.tendon[{k}].direction={end.direction!r}: use one of {_DIRECTIONS}"
                )
            used[end.entity] = used.get(end.entity, 0) + 1
    for ent in scene.entities:
        cap = ENTITY_TYPES[ent.type].ends
        if used.get(ent.name, 0) > cap:
            raise SceneError(
                f"entity {ent.name!r} ({ent.type}) has {used[ent.name]} tendon ends attached; "
                f"it accepts {cap}"
            )
    return scene


def _as_float(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SceneError(f"{where}={value!r}: must be a number")
    return float(value)


def scene_from_dict(data: Any) -> Scene:
    """Build (and validate) a :class:`Scene` from the DSL mapping ``{"scene": {...}}``."""
    if not isinstance(data, dict) or "scene" not in data or not isinstance(data["scene"], dict):
        raise SceneError("the document must be a mapping with a top-level 'scene' mapping")
    s = data["scene"]
    unknown = sorted(set(s) - {"name", "tag", "entities", "connections"})
    if unknown:
        raise SceneError(f"scene: unknown keys {unknown}; known: name, tag, entities, connections")
    if not isinstance(s.get("entities"), list):
        raise SceneError("scene.entities must be a list of entity mappings")
    ents = []
    for i, e in enumerate(s["entities"]):
        if not isinstance(e, dict):
            raise SceneError(f"entities[{i}] must be a mapping")
        for key in ("name", "type"):
            if key not in e:
                raise SceneError(f"entities[{i}].{key} is missing")
        pos = e.get("position", [0.0, 0.0, 0.0])
        if not isinstance(pos, list | tuple) or len(pos) != 3:
            raise SceneError(f"entities[{i}].position={pos!r}: need [x, y, z]")
        params = e.get("parameters", {}) or {}
        if not isinstance(params, dict):
            raise SceneError(f"entities[{i}].parameters must be a mapping")
        ents.append(
            Entity(
                name=str(e["name"]),
                type=str(e["type"]),
                position=tuple(_as_float(p, f"entities[{i}].position") for p in pos),  # type: ignore[arg-type]
                parameters={
                    str(k): _as_float(v, f"entities[{i}].parameters.{k}") for k, v in params.items()
                },
            )
        )
    tendons = []
    for j, c in enumerate(s.get("connections", []) or []):
        if not isinstance(c, dict) or not isinstance(c.get("tendon"), list):
            raise SceneError(f"connections[{j}] must be a mapping with a 'tendon' list")
        ends = []
        for k, end in enumerate(c["tendon"]):
            if not isinstance(end, dict) or "entity" not in end:
                raise SceneError(f"connections[{j}].tendon[{k}].entity is missing")
            ends.append(
                TendonEnd(
                    entity=str(end["entity"]),
                    direction=str(end.get("direction", "inner_to_outer")),
                    connecting_point=end.get("connecting_point"),
                )
            )
        tendons.append(Tendon(ends=ends, name=str(c.get("name", ""))))
    scene = Scene(name=str(s.get("name", "")), entities=ents, connections=tendons,
                  tag=str(s.get("tag", "")))  # fmt: skip
    return validate(scene)


def scene_to_dict(scene: Scene) -> dict[str, Any]:
    """The DSL mapping of ``scene`` (inverse of :func:`scene_from_dict`)."""
    conns = []
    for t, name in zip(scene.connections, scene.tendon_names(), strict=True):
        ends = []
        for e in t.ends:
            d: dict[str, Any] = {"entity": e.entity, "direction": e.direction}
            if e.connecting_point is not None:
                d["connecting_point"] = e.connecting_point
            ends.append(d)
        conns.append({"name": name, "tendon": ends})
    return {
        "scene": {
            "name": scene.name,
            "tag": scene.tag,
            "entities": [
                {
                    "name": e.name,
                    "type": e.type,
                    "position": [float(p) for p in e.position],
                    "parameters": {k: float(v) for k, v in e.parameters.items()},
                }
                for e in scene.entities
            ],
            "connections": conns,
        }
    }


def load_yaml(source: str | Path) -> Scene:
    """Read a scene from a YAML file path or a YAML string (safe loader only)."""
    text: str
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source
                                     and source.endswith((".yaml", ".yml"))):  # fmt: skip
        path = Path(source)
        if not path.is_file():
            raise SceneError(f"scene file {str(path)!r} does not exist")
        text = path.read_text()
    else:
        text = str(source)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise SceneError(f"malformed YAML: {e}") from e
    return scene_from_dict(data)


def dump_yaml(scene: Scene) -> str:
    """The scene as YAML text (stable key order, so equal scenes give equal bytes)."""
    return yaml.safe_dump(scene_to_dict(scene), sort_keys=False, default_flow_style=None)
