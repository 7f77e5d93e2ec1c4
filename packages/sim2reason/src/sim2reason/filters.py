"""Shortcut filter (component ablation) and deduplication of QA pairs.

The paper (Sec. 3.4) drops questions whose answers do not need the whole scene: every proper,
non-empty subset of the entities is simulated as a child scene (tendons touching removed
entities dropped), plus one scene-specific shortcut variant (here: all strings cut), and a
question is dropped when any child reproduces its answer within ``rel_tol`` for the same
attribute at the same time. Children lacking the attribute are skipped.
"""

from __future__ import annotations

import copy
import itertools
import logging
from collections.abc import Iterable, Sequence

from sim2reason.dsl import Scene
from sim2reason.engines import AnalyticEngine, Engine
from sim2reason.errors import ConfigError
from sim2reason.qa import QAPair
from sim2reason.recording import Recording

__all__ = ["MAX_ENTITIES", "child_scenes", "dedup", "shortcut_filter"]

log = logging.getLogger(__name__)

MAX_ENTITIES = 10
"""Scenes with more entities need an explicit ``max_children`` (2^k - 2 children)."""


def child_scenes(scene: Scene, max_children: int | None = None) -> list[Scene]:
    """Every proper non-empty entity subset as a scene (2^k - 2), plus the shortcut variant.

    The shortcut variant keeps all entities and cuts every string (only when the scene has
    strings): a question about a body whose answer survives cutting its string does not need
    the string. ``max_children`` caps the subsets (smallest subsets first) and is required
    above :data:`MAX_ENTITIES` entities.
    """
    k = len(scene.entities)
    if k > MAX_ENTITIES and max_children is None:
        raise ConfigError(
            f"scene {scene.name!r} has {k} entities: the shortcut filter would simulate "
            f"2^{k} - 2 = {2**k - 2} children; pass max_children (--max-children) to cap them"
        )
    if max_children is not None and (not isinstance(max_children, int) or max_children < 0):
        raise ConfigError(f"max_children={max_children!r}: must be a non-negative int")
    out: list[Scene] = []
    names = [e.name for e in scene.entities]
    for size in range(1, k):
        for keep in itertools.combinations(names, size):
            if max_children is not None and len(out) >= max_children:
                break
            kept = set(keep)
            out.append(
                Scene(
                    name=f"{scene.name}__child_{'_'.join(keep)}",
                    entities=[copy.deepcopy(e) for e in scene.entities if e.name in kept],
                    connections=[copy.deepcopy(t) for t in scene.connections
                                 if all(end.entity in kept for end in t.ends)],
                    tag=scene.tag,
                )
            )  # fmt: skip
    if scene.connections:
        out.append(
            Scene(
                name=f"{scene.name}__shortcut",
                entities=copy.deepcopy(scene.entities),
                connections=[],
                tag=scene.tag,
            )
        )
    return out


def _close(a: float, b: float, rel_tol: float, thr: float = 1e-9) -> bool:
    a, b = abs(a), abs(b)
    if b <= thr:
        return abs(a - b) <= thr
    return abs(a - b) / b <= rel_tol


def shortcut_filter(
    qas: Sequence[QAPair],
    scene: Scene,
    engine: Engine | None = None,
    rel_tol: float = 0.05,
    *,
    dt: float = 1e-3,
    duration: float = 2.0,
    max_children: int | None = None,
    children: Sequence[Recording] | None = None,
) -> list[QAPair]:
    """Keep the questions no child scene can answer (``| |a_c| - |a| | / |a| > rel_tol``).

    The attribute compared is the question's ``simulation_mapping["attribute"]`` at its time
    (for reverse questions, the given quantity). Unstable children are skipped with a log line.
    """
    if not 0 < rel_tol < 1:
        raise ConfigError(f"rel_tol={rel_tol!r}: must be in (0, 1)")
    engine = engine or AnalyticEngine()
    if children is None:
        recs = []
        for child in child_scenes(scene, max_children):
            rec = engine.simulate(child, dt=dt, duration=duration)
            if rec.unstable:
                log.info("child %s dropped: %s", child.name, rec.reason)
                continue
            recs.append(rec)
    else:
        recs = list(children)
    kept = []
    for qa in qas:
        m = qa.simulation_mapping
        attr, t = m["attribute"], float(m["time"])
        comp = m.get("component", "norm")
        # Reverse questions give the quantity's value; numeric and symbolic ones ask for it.
        target = m["given_value"] if qa.kind == "reverse" else qa.answer
        shortcut = False
        for rec in recs:
            if not rec.has(attr):
                continue
            if _close(rec.value(attr, t, comp), target, rel_tol):
                shortcut = True
                break
        if not shortcut:
            kept.append(qa)
    return kept


def dedup(qas: Iterable[QAPair]) -> list[QAPair]:
    """Drop questions whose text was already seen (first one kept, order preserved)."""
    seen: set[str] = set()
    out = []
    for qa in qas:
        if qa.text not in seen:
            seen.add(qa.text)
            out.append(qa)
    return out
