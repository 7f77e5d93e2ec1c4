"""Question-answer pairs from recordings: numeric, reverse and symbolic templates.

Implements the paper's rule-based QA generation (Sec. 3.3): the scene text is the
concatenation of per-entity descriptions following the graph plus a fixed assumptions
sentence; a question picks a body (or a string), a quantity from its category's menu and a
time in the second half of the recording, and its answer is the recorded value there (vectors
reduced to their norm). Reverse questions mask one parameter as ``x`` and give the quantity's
value; symbolic questions write parameters as symbols and keep the numeric truth plus the
symbol -> value mapping.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import sympy as sp

from sim2reason.dsl import ENTITY_TYPES, Entity, Scene
from sim2reason.engines import AnalyticEngine, Engine, G, chain_bodies, components
from sim2reason.errors import QAError
from sim2reason.recording import Recording

__all__ = [
    "ASSUMPTIONS",
    "PHRASES",
    "QUANTITIES",
    "QAPair",
    "describe",
    "evaluate_solution",
    "generate_qa",
    "solution_latex",
    "symbol_for",
]

Kind = Literal["numeric", "reverse", "symbolic"]
KINDS = ("numeric", "reverse", "symbolic")

#: Quantity menus per scene category (Sec. 3.3); ``tension`` asks about a string.
QUANTITIES: dict[str, tuple[str, ...]] = {
    "pulley": ("net_force", "acceleration", "displacement", "velocity", "kinetic_energy",
               "potential_energy_change", "momentum", "tension"),
    "collision": ("velocity", "momentum", "kinetic_energy", "displacement"),
    "spring": ("velocity", "acceleration", "displacement", "kinetic_energy", "net_force",
               "potential_energy_change"),
    "rotation": ("angular_velocity", "angular_acceleration", "velocity", "acceleration",
                 "kinetic_energy", "potential_energy_change", "net_force", "tension"),
    "projectile": ("velocity", "displacement", "kinetic_energy", "momentum",
                   "potential_energy_change", "acceleration"),
    "orbital": ("net_force", "acceleration", "displacement", "velocity", "kinetic_energy",
                "potential_energy_change"),
    "rigid_rotation": ("angular_velocity", "angular_acceleration", "angular_momentum",
                       "net_torque", "kinetic_energy", "moment_of_inertia"),
}  # fmt: skip

PHRASES: dict[str, tuple[str, str]] = {
    "net_force": ("magnitude of the net force on", "N"),
    "acceleration": ("magnitude of the acceleration of", "m/s^2"),
    "displacement": ("magnitude of the displacement from its starting point of", "m"),
    "velocity": ("magnitude of the velocity of", "m/s"),
    "kinetic_energy": ("kinetic energy of", "J"),
    "potential_energy_change": ("magnitude of the change in potential energy of", "J"),
    "momentum": ("magnitude of the linear momentum of", "kg m/s"),
    "angular_velocity": ("magnitude of the angular velocity of", "rad/s"),
    "angular_acceleration": ("magnitude of the angular acceleration of", "rad/s^2"),
    "angular_momentum": ("magnitude of the angular momentum about its axle of", "kg m^2/s"),
    "net_torque": ("magnitude of the net torque about its axle on", "N m"),
    "moment_of_inertia": ("moment of inertia about its axle of", "kg m^2"),
    "tension": ("tension in", "N"),
}

ASSUMPTIONS = (
    "Take g = 9.81 m/s^2. Strings are massless and inextensible, pulleys are massless and "
    "frictionless, surfaces are frictionless unless a friction coefficient is given, and all "
    "bodies start at rest unless a velocity is given. Inclines rise toward their pulley."
)

_SYMBOL = {"mass": "m", "force": "F", "mu_k": r"\mu", "mu_s": r"\mu_s", "angle": r"\theta",
           "height": "h", "speed": "v", "restitution": "e", "mass_1": "m_1", "mass_2": "m_2",
           "velocity_1": "u_1", "velocity_2": "u_2", "gap": "d", "stiffness": "k",
           "amplitude": "A", "length": "L", "radius": "r", "torque": r"\tau",
           "central_mass": "M", "fuel_mass": "m_f", "exhaust_speed": "v_e", "burn_rate": "b",
           "charge": "q", "e_field": "E", "b_field": "B", "e_angle": r"\theta_E",
           "counterweight": "M", "inertia_factor": "c", "offset": "b",
           "central_radius": "R"}  # fmt: skip


def symbol_for(entity: str, param: str) -> str:
    """LaTeX symbol of one parameter in symbolic questions, e.g. ``m_{cart0}``."""
    base = _SYMBOL.get(param, param)
    if "_" in base:
        return f"{base}{{}}_{{{entity}}}".replace("{}", "")
    return f"{base}_{{{entity}}}"


@dataclass
class QAPair:
    """One question with its recorded answer and everything needed to check or re-derive it."""

    text: str
    answer: float
    kind: str = "numeric"
    simulation_mapping: dict[str, Any] = field(default_factory=dict)
    """``{"attribute": "<entity>.<body>.<quantity>", "time": t, "component": "norm"}`` (+
    ``masked_parameter`` for reverse questions)."""
    given_variable_mapping: dict[str, float] = field(default_factory=dict)
    """Symbol -> value for symbolic questions (angles in degrees)."""
    scene_type: str = ""
    reference: str = ""
    """The scene (name or path) the question was made from."""
    solution: str = ""
    """Symbolic questions: the reference expression (sympy syntax) in the mapping's symbols."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> QAPair:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})


def _fmt(v: float) -> str:
    return f"{v:g}"


def _val(e: Entity, key: str, symbolic: bool, masked: str | None = None) -> str:
    if masked == f"{e.name}.{key}":
        return "x"
    if symbolic:
        return symbol_for(e.name, key)
    return _fmt(e.param(key))


def _friction(e: Entity, symbolic: bool, masked: str | None) -> str:
    if "mu_k" not in e.parameters or e.param("mu_k") == 0.0:
        return " (frictionless)"
    s = f" with kinetic friction coefficient {_val(e, 'mu_k', symbolic, masked)}"
    if "mu_s" in e.parameters and not symbolic:
        s += f" and static coefficient {_val(e, 'mu_s', symbolic, masked)}"
    return s


def describe_entity(e: Entity, symbolic: bool = False, masked: str | None = None) -> str:
    """One entity's sentence (values, symbols, or ``x`` for the masked parameter)."""

    def v(key: str) -> str:
        return _val(e, key, symbolic, masked)

    n = e.name
    t = e.type
    if t == "DirectedMass":
        return (
            f"A block {n} of mass {v('mass')} kg on a frictionless horizontal floor is pushed "
            f"by a constant horizontal force of {v('force')} N."
        )
    if t == "HangingMass":
        return f"A mass {n} of {v('mass')} kg hangs from a string."
    if t == "TableBlock":
        return f"A block {n} of mass {v('mass')} kg lies on a horizontal table{_friction(e, symbolic, masked)}."
    if t == "InclineBlock":
        return (
            f"A block {n} of mass {v('mass')} kg sits on a fixed incline at {v('angle')} degrees "
            f"to the horizontal{_friction(e, symbolic, masked)}."
        )
    if t == "ThrowingMotionEntity":
        return (
            f"A ball {n} of mass {v('mass')} kg is thrown from a height of {v('height')} m with "
            f"speed {v('speed')} m/s at {v('angle')} degrees above the horizontal; it bounces on "
            f"the floor with restitution coefficient {v('restitution')}."
        )
    if t == "CollisionPair":
        return (
            f"On a frictionless line, block 1 of {n} (mass {v('mass_1')} kg, velocity "
            f"{v('velocity_1')} m/s) is {v('gap')} m behind block 2 of {n} (mass {v('mass_2')} kg, "
            f"velocity {v('velocity_2')} m/s); they collide with restitution coefficient "
            f"{v('restitution')}."
        )
    if t == "SpringBlockEntity":
        return (
            f"A block {n} of mass {v('mass')} kg on a frictionless floor is attached to a spring "
            f"of stiffness {v('stiffness')} N/m, pulled {v('amplitude')} m from equilibrium and "
            "released."
        )
    if t == "PendulumEntity":
        return (
            f"A pendulum {n} has a bob of mass {v('mass')} kg on a light rod of length "
            f"{v('length')} m and is released from rest at {v('angle')} degrees from the vertical."
        )
    from sim2reason.families import describe_entity as describe_more

    text = describe_more(e, v)
    if text is not None:
        return text
    params = ", ".join(f"{k} {v(k)}" for k in ENTITY_TYPES[t].params if k in e.parameters)
    return f"An object {n} ({t}) has {params}."  # fmt: skip


_COMPACT = {
    "DirectedMass": "{n}: m={mass} kg, F={force} N.",
    "HangingMass": "{n}: m={mass} kg.",
    "TableBlock": "{n}: block m={mass} kg on a table, mu={mu_k}.",
    "InclineBlock": "{n}: block m={mass} kg on a {angle} deg incline, mu={mu_k}.",
    "ThrowingMotionEntity": "{n}: m={mass} kg, v={speed} m/s, {angle} deg, h={height} m.",
}

#: Short quantity names of the compact style.
COMPACT_NAMES = {"net_force": "net force", "acceleration": "acceleration",
                 "displacement": "displacement", "velocity": "velocity",
                 "kinetic_energy": "kinetic energy", "potential_energy_change": "PE change",
                 "momentum": "momentum", "angular_velocity": "angular velocity",
                 "angular_acceleration": "angular acceleration", "tension": "tension",
                 "angular_momentum": "angular momentum", "net_torque": "net torque",
                 "moment_of_inertia": "moment of inertia"}  # fmt: skip


def describe(scene: Scene, symbolic: bool = False, masked: str | None = None,
             style: str = "full") -> str:  # fmt: skip
    """Scene text: entity sentences in graph order, string sentences, then the assumptions.

    ``style="compact"`` is a terse variant of the same templates (short enough for the
    character-level models trained on CPU); it omits the assumptions sentence.
    """
    if style == "compact":
        out = []
        for e in scene.entities:
            tpl = _COMPACT.get(e.type)
            if tpl is None:
                out.append(describe_entity(e, symbolic, masked))
                continue
            vals = {k: _val(e, k, symbolic, masked) if k in e.parameters or
                    ENTITY_TYPES[e.type].params[k].default is not None else "0"
                    for k in ENTITY_TYPES[e.type].params}  # fmt: skip
            out.append(tpl.format(n=e.name, **vals))
        for tendon in scene.connections:
            out.append(f"{tendon.ends[0].entity}-{tendon.ends[1].entity} string.")
        return " ".join(out)
    if style != "full":
        raise QAError(f"style={style!r}: use 'full' or 'compact'")
    parts = [describe_entity(e, symbolic, masked) for e in scene.entities]
    for tendon in scene.connections:
        a, b = tendon.ends[0].entity, tendon.ends[1].entity
        parts.append(f"A light string over a pulley connects {a} to {b}.")
    parts.append(ASSUMPTIONS)
    return " ".join(parts)


def body_phrase(body: str) -> str:
    """``"pair0.block_1"`` -> ``"block 1 of pair0"``, ``"pulley0.load"`` -> ``"the load of
    pulley0"``; single-body entities by name."""
    ent, _, part = body.partition(".")
    if part[-2:] in ("_1", "_2"):
        return f"{part[:-2]} {part[-1]} of {ent}"
    if part in ("load", "counterweight"):
        return f"the {part} of {ent}"
    return ent


def _string_phrase(name: str, scene: Scene) -> str:
    for t in scene.connections:
        if t.name == name:
            return f"the string connecting {t.ends[0].entity} to {t.ends[1].entity}"
    ent, _, part = name.partition(".")
    return f"the {part.replace('_', ' ')} of {ent}"  # an entity's own string: "the rod of p0"


def _category(scene: Scene, body: str) -> str:
    from sim2reason.families import CATEGORY
    from sim2reason.generate import SCENE_TYPES

    etype = scene.entity(body.split(".")[0]).type
    if etype in CATEGORY:
        return CATEGORY[etype]
    if etype in ("PendulumEntity", "RigidRotationEntity"):
        return "rotation"
    if etype == "ThrowingMotionEntity":
        return "projectile"
    if etype in ("CollisionPair", "ComplexCollisionPlane"):
        return "collision"
    if etype in ("SpringBlockEntity", "SpringMassPlaneEntity"):
        return "spring"
    st = scene.tag.split("/")[0]
    return SCENE_TYPES[st].category if st in SCENE_TYPES else "pulley"


def _times(rec: Recording, rng: random.Random, time_grid: float | None) -> float:
    """A time from the second half of the recording, shown and used at 2 decimals."""
    if time_grid:
        lo = math.ceil(rec.duration / 2 / time_grid - 1e-9)
        hi = math.floor(rec.duration / time_grid + 1e-9)
        return round(rng.randint(lo, hi) * time_grid, 2)
    n = len(rec.time)
    idx = rng.randrange(n // 2, n)
    return round(float(rec.time[idx]), 2)


def _scene_type(scene: Scene) -> str:
    return scene.tag.split("/")[0] if scene.tag else scene.name


def _numeric(scene: Scene, rec: Recording, rng: random.Random, time_grid: float | None,
             quantities: Sequence[str] | None = None, style: str = "full"
             ) -> tuple[str, str, float, str] | None:  # fmt: skip
    """(question sentence, attribute, time, unit) for one random body/string quantity."""
    allow = set(quantities) if quantities else None
    strings = list(rec.strings) if allow is None or "tension" in allow else []
    bodies = list(rec.bodies)
    if not bodies:
        return None
    use_string = bool(strings) and rng.random() < 0.25
    t = _times(rec, rng, time_grid)
    if use_string:
        name = rng.choice(strings)
        attr = f"{name}.tension"
        if style == "compact":
            return f"tension in {name} at t={t:.2f} s?", attr, t, "N"
        q = f"What is the tension in {_string_phrase(name, scene)} after {t:.2f} seconds?"
        return q, attr, t, "N"
    body = rng.choice(bodies)
    menu = [q for q in QUANTITIES[_category(scene, body)] if q != "tension"]
    menu = [q for q in menu if rec.has(f"{body}.{q}") and (allow is None or q in allow)]
    if not menu:
        return None
    quantity = rng.choice(menu)
    phrase, unit = PHRASES[quantity]
    if style == "compact":
        return (
            f"{COMPACT_NAMES[quantity]} of {body_phrase(body)} at t={t:.2f} s?",
            f"{body}.{quantity}",
            t,
            unit,
        )
    q = f"What is the {phrase} {body_phrase(body)} after {t:.2f} seconds?"
    return q, f"{body}.{quantity}", t, unit


def _reverse(scene: Scene, rec: Recording, rng: random.Random, engine: Engine,
             time_grid: float | None) -> QAPair | None:  # fmt: skip
    picked = _numeric(scene, rec, rng, time_grid)
    if picked is None:
        return None
    _, attr, t, unit = picked
    value = rec.value(attr, t)
    cands = [(e, k) for e in scene.entities for k in e.parameters if k != "mu_s"]
    rng.shuffle(cands)
    for e, key in cands:
        x = e.param(key)
        if x == 0.0:
            continue
        # Keep only parameters the given quantity depends on (else x is not determined).
        probe = _perturbed(scene, e.name, key, x * 1.1)
        try:
            r2 = engine.simulate(probe, dt=float(rec.time[1] - rec.time[0]), duration=rec.duration)
            v2 = r2.value(attr, t)
        except Exception:
            continue
        if r2.unstable or abs(v2 - value) <= 0.01 * max(abs(value), 1e-9):
            continue
        head, _, quantity = attr.rpartition(".")
        if quantity == "tension":
            subject = f"the tension in {_string_phrase(head, scene)}"
        else:
            subject = f"the {PHRASES[quantity][0]} {body_phrase(head)}"
        text = (f"{describe(scene, masked=f'{e.name}.{key}')} After {t:.2f} seconds, {subject} is "
                f"{value:.2f} {unit}. What is x?")  # fmt: skip
        return QAPair(text=text, answer=x, kind="reverse",
                      simulation_mapping={"attribute": attr, "time": t, "component": "norm",
                                          "masked_parameter": f"{e.name}.{key}",
                                          "given_value": round(value, 2)},
                      scene_type=_scene_type(scene), reference=scene.name)  # fmt: skip
    return None


def _perturbed(scene: Scene, ent: str, key: str, value: float) -> Scene:
    import copy

    s = copy.deepcopy(scene)
    s.entity(ent).parameters[key] = value
    return s


def _chain_expr(scene: Scene, attr: str) -> sp.Expr | None:
    """Closed-form sympy expression of a quantity (its magnitude): pushed blocks and string
    chains here, the other closed-form families in :func:`sim2reason.families.symbolic_expr`."""
    head, _, quantity = attr.rpartition(".")
    t, g = sp.Symbol("t"), sp.Symbol("g")
    for comp in components(scene):
        names = [e.name for e in comp.entities]
        if comp.family == "constant_force" and comp.entities[0].type == "DirectedMass":
            e = comp.entities[0]
            if head != f"{e.name}.block":
                continue
            m, F = sp.Symbol(symbol_for(e.name, "mass")), sp.Symbol(symbol_for(e.name, "force"))
            a, mass, uz = F / m, m, 0
        elif ENTITY_TYPES[comp.entities[0].type].family == "string":
            bodies = chain_bodies(comp.entities)
            D = sum(b.drive for b in bodies)
            fs = sum(b.mu_s * b.normal for b in bodies)
            if abs(D) <= fs + 1e-12:
                return None  # static: trivial zeros
            sign = 1 if D > 0 else -1
            terms, masses, drives = [], [], []
            for b in bodies:
                e = b.entity
                m = sp.Symbol(symbol_for(e.name, "mass"))
                masses.append(m)
                if e.type == "HangingMass":
                    dr = m * g * (1 if b.drive > 0 else -1)
                    fr = 0
                else:
                    mu = sp.Symbol(symbol_for(e.name, "mu_k")) if e.param("mu_k") else 0
                    if e.type == "TableBlock":
                        dr, nrm = 0, m * g
                    else:
                        th = sp.Symbol(symbol_for(e.name, "angle"))
                        dr = m * g * sp.sin(th) * (1 if b.drive > 0 else -1)
                        nrm = m * g * sp.cos(th)
                    fr = -sign * mu * nrm
                drives.append(dr)
                terms.append(fr)
            a = (sum(drives) + sum(terms)) / sum(masses)
            if quantity == "tension":
                if head not in comp.tendons:
                    continue
                k = comp.tendons.index(head)
                prev = 0
                for i in range(k + 1):
                    prev = masses[i] * a - drives[i] - terms[i] + prev
                return sp.simplify(prev)
            if not head.startswith(tuple(n + "." for n in names)):
                continue
            idx = [f"{n}.{ENTITY_TYPES[scene.entity(n).type].bodies[0]}" for n in names].index(head)
            mass, uz = masses[idx], float(bodies[idx].direction[2])
        else:
            continue
        s = a * t**2 / 2
        table = {"acceleration": a, "velocity": a * t, "displacement": s, "net_force": mass * a,
                 "momentum": mass * a * t, "kinetic_energy": mass * (a * t) ** 2 / 2,
                 "potential_energy_change": mass * g * uz * s}  # fmt: skip
        return table.get(quantity)
    from sim2reason.families import symbolic_expr

    return symbolic_expr(scene, attr)


def _parse_solution(solution: str, mapping: dict[str, float]) -> tuple[sp.Expr, dict[str, str]]:
    import re

    # LaTeX-style names (m_{cart0}) are not Python identifiers: rename before parsing.
    names = sorted(
        set(re.findall(r"\\?[A-Za-z]+(?:_\{?[A-Za-z0-9]*\}?)?(?:_\{[A-Za-z0-9]+\})?", solution)),
        key=len,
        reverse=True,
    )
    safe: dict[str, str] = {}
    text = solution
    for i, name in enumerate(n for n in names if n in mapping):
        safe[f"s{i}__"] = name
        # Whole names only: the ``t`` of ``sqrt`` is not the symbol t.
        pattern = r"(?<![A-Za-z0-9_\\])" + re.escape(name) + r"(?![A-Za-z0-9_{])"
        text = re.sub(pattern, f"s{i}__", text)
    funcs = {"sin": sp.sin, "cos": sp.cos, "tan": sp.tan, "sqrt": sp.sqrt, "g": sp.Symbol("g")}
    unknown = sorted(n for n in names if n not in mapping and n not in funcs and "_" in n)
    if unknown:
        raise QAError(f"the mapping lacks symbol(s) {unknown} used by the reference")
    try:
        expr = sp.sympify(text, locals={**funcs, **{k: sp.Symbol(k) for k in safe}})
    except (sp.SympifyError, SyntaxError, TypeError) as e:
        raise QAError(f"reference expression {solution!r} cannot be read: {e}") from e
    return expr, safe


def evaluate_solution(solution: str, mapping: dict[str, float]) -> float:
    """Evaluate a stored reference expression (our own sympy text, never model output)."""
    expr, safe = _parse_solution(solution, mapping)
    subs: dict[Any, float] = {sp.Symbol("g"): G}
    for k, name in safe.items():
        v = mapping[name]
        subs[sp.Symbol(k)] = math.radians(v) if "theta" in name else v
    missing = {str(s) for s in expr.free_symbols} - {str(s) for s in subs}
    if missing:
        raise QAError(f"the mapping lacks symbol(s) {sorted(missing)} used by the reference")
    return abs(float(expr.subs(subs)))


def solution_latex(qa: QAPair) -> str:
    """The reference expression of a symbolic question as LaTeX, in the question's symbols."""
    expr, safe = _parse_solution(qa.solution, qa.given_variable_mapping)
    return sp.latex(expr, symbol_names={sp.Symbol(k): v for k, v in safe.items()})


def _symbolic(scene: Scene, rec: Recording, rng: random.Random,
              time_grid: float | None) -> QAPair | None:  # fmt: skip
    for _ in range(8):
        picked = _numeric(scene, rec, rng, time_grid)
        if picked is None:
            return None
        q, attr, t, _ = picked
        expr = _chain_expr(scene, attr)
        if expr is None or not ({str(x) for x in sp.sympify(expr).free_symbols} - {"t", "g"}):
            continue  # no closed form here, or a trivial one (zero, or g t alone)
        mapping = {symbol_for(e.name, k): e.param(k) for e in scene.entities for k in e.parameters}
        used = {str(s) for s in expr.free_symbols} - {"g"}
        mapping = {k: v for k, v in mapping.items() if k in used}
        mapping["t"] = t
        solution = str(expr)
        answer = evaluate_solution(solution, mapping)
        text = (f"{describe(scene, symbolic=True)} "
                f"{q.replace(f'after {t:.2f} seconds', 'after a time t')} Answer with an "
                "expression in the given symbols, t and g.")  # fmt: skip
        return QAPair(text=text, answer=answer, kind="symbolic",
                      simulation_mapping={"attribute": attr, "time": t, "component": "norm"},
                      given_variable_mapping=mapping, scene_type=_scene_type(scene),
                      reference=scene.name, solution=solution)  # fmt: skip
    return None


def generate_qa(
    scene: Scene,
    recording: Recording,
    kind: str = "numeric",
    n: int = 10,
    rng: random.Random | int | None = None,
    *,
    time_grid: float | None = None,
    engine: Engine | None = None,
    quantities: Sequence[str] | None = None,
    style: str = "full",
) -> list[QAPair]:
    """Up to ``n`` questions of one ``kind`` about ``scene`` from its ``recording``.

    Times are drawn from the second half of the recording (or from multiples of
    ``time_grid`` there). Unstable recordings give no questions. Reverse questions re-simulate
    with ``engine`` (default analytic) to keep only parameters the given quantity depends on;
    symbolic ones cover the families with closed forms (pushed blocks, string chains, springs,
    the movable pulley, the rigid body on a central axle, charges in a single uniform field).
    ``quantities``
    restricts the menu; ``style="compact"`` uses the terse templates (numeric questions only).
    """
    if style != "full" and kind != "numeric":
        raise QAError(f"style={style!r} is available for numeric questions only")
    if kind not in KINDS:
        raise QAError(f"kind={kind!r}: use one of {KINDS}")
    if recording.unstable:
        return []
    if not isinstance(rng, random.Random):
        rng = random.Random(rng if rng is not None else f"{scene.name}:{kind}")
    out: list[QAPair] = []
    for _ in range(n * 3):
        if len(out) >= n:
            break
        if kind == "numeric":
            picked = _numeric(scene, recording, rng, time_grid, quantities, style)
            if picked is None:
                break
            q, attr, t, _ = picked
            value = recording.value(attr, t)
            out.append(QAPair(text=f"{describe(scene, style=style)} {q}", answer=value,
                              kind="numeric",
                              simulation_mapping={"attribute": attr, "time": t,
                                                  "component": "norm"},
                              scene_type=_scene_type(scene), reference=scene.name))  # fmt: skip
        elif kind == "reverse":
            qa = _reverse(scene, recording, rng, engine or AnalyticEngine(), time_grid)
            if qa is not None:
                out.append(qa)
        else:
            qa = _symbolic(scene, recording, rng, time_grid)
            if qa is not None:
                out.append(qa)
    return out
