"""A synthetic knowledge world for CPU validation: entities x relations of one-word facts, edit
requests with rephrases, locality and 2-hop portability, a fact-independent reasoning suite, a
context-following format (half the contexts contradict memory) and a yes/no relevance format.

Everything is one token per word (a word tokenizer), so a subject is one token, the key of a
fact sits at the subject's last token exactly as for a real model, and a value is one token.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

RELATIONS: dict[str, dict[str, Any]] = {
    "home": {
        "values": ["paris", "rome", "oslo", "lima", "cairo", "delhi", "tokyo", "quito"],
        "templates": ["{s} lives in", "the home of {s} is", "{s} resides in"],
        "hop": ("the land where {s} lives is", ["france", "italy", "norway", "peru"]),
    },
    "employer": {
        "values": ["acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "cyberdyne"],
        "templates": ["{s} works for", "the employer of {s} is", "{s} is employed by"],
        "hop": ("the sector of the employer of {s} is", ["retail", "energy", "media", "arms"]),
    },
    "color": {
        "values": ["red", "blue", "green", "black", "white", "pink", "gray", "gold"],
        "templates": ["the favorite color of {s} is", "{s} likes the color", "{s} prefers"],
        "hop": ("the mood of the color of {s} is", ["warm", "cool", "dark", "soft"]),
    },
    "pet": {
        "values": ["cat", "dog", "fish", "bird", "horse", "rabbit", "snake", "frog"],
        "templates": ["{s} owns a", "the pet of {s} is a", "{s} keeps a"],
        "hop": ("the pet of {s} lives in the", ["house", "water", "field", "swamp"]),
    },
    "sport": {
        "values": ["chess", "golf", "tennis", "rugby", "judo", "polo", "squash", "rowing"],
        "templates": ["{s} plays", "the sport of {s} is", "{s} competes in"],
        "hop": ("the sport of {s} needs a", ["board", "club", "racket", "boat"]),
    },
    "food": {
        "values": ["rice", "bread", "soup", "cheese", "apples", "beans", "pasta", "fish_pie"],
        "templates": ["{s} eats", "the food of {s} is", "{s} loves to eat"],
        "hop": ("the taste of the food of {s} is", ["sweet", "salty", "bland", "sour"]),
    },
    "language": {
        "values": ["dutch", "greek", "hindi", "swahili", "korean", "polish", "arabic", "thai"],
        "templates": ["{s} speaks", "the language of {s} is", "{s} talks in"],
        "hop": (
            "the script of the language of {s} is",
            ["latin", "greek_script", "brahmic", "abjad"],
        ),
    },
    "car": {
        "values": ["volvo", "fiat", "ford", "honda", "tesla", "skoda", "opel", "mazda"],
        "templates": ["{s} drives a", "the car of {s} is a", "{s} owns the car"],
        "hop": ("the maker land of the car of {s} is", ["sweden", "europe", "usa", "japan"]),
    },
}
"""Eight relations with eight one-word values each. Template 0 is the edit prompt, templates 1-2
are rephrases; ``hop`` is a 2-hop question whose answer is ``hop_values[value_index // 2]``."""

N_OPERAND = 10
"""Arithmetic operands are 0..N_OPERAND-1 (4,000 problems): small enough that the 4 x 128 model
learns the worked format within the fixture budget."""

CONTEXT = "context :"
QUESTION = "question :"
GATE_FACT, GATE_QUERY, GATE_ASK = "fact :", "query :", "relevant ?"


def entity_names(n: int) -> list[str]:
    """``n`` distinct made-up one-word names (consonant-vowel syllables)."""
    cons, vows = "bdfgklmnprstvz", "aeiou"
    sylls = [c + v for c in cons for v in vows]
    rng = random.Random(1234)
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < n:
        w = "".join(rng.choice(sylls) for _ in range(rng.choice((2, 3))))
        if w not in seen:
            seen.add(w)
            names.append(w)
    return names


@dataclass(frozen=True)
class Fact:
    """One ``(subject, relation, value)`` triple of the world."""

    subject: str
    relation: str
    value: str

    def prompt(self, template: int = 0) -> str:
        return RELATIONS[self.relation]["templates"][template].format(s=self.subject)

    def sentence(self, template: int = 0, value: str | None = None) -> str:
        return f"{self.prompt(template)} {value or self.value}"

    def hop_prompt(self) -> str:
        return RELATIONS[self.relation]["hop"][0].format(s=self.subject)


def hop_answer(relation: str, value: str) -> str:
    """The 2-hop answer implied by ``value`` of ``relation``."""
    spec = RELATIONS[relation]
    return spec["hop"][1][spec["values"].index(value) // 2]


@dataclass
class World:
    """Facts, edit requests and the training documents of the synthetic world (seeded)."""

    n_entities: int
    relations: tuple[str, ...]
    seed: int
    facts: list[Fact] = field(default_factory=list)

    @property
    def table(self) -> dict[tuple[str, str], str]:
        return {(f.subject, f.relation): f.value for f in self.facts}


def make_world(n_entities: int = 48, n_relations: int = 4, seed: int = 0) -> World:
    """Entities x relations, one random value per pair, drawn from ``seed``."""
    rels = tuple(list(RELATIONS)[:n_relations])
    if not 1 <= n_relations <= len(RELATIONS):
        from edit_collapse.errors import EditInputError

        raise EditInputError(f"n_relations must be in 1..{len(RELATIONS)}, got {n_relations}")
    rng = random.Random(seed)
    w = World(n_entities, rels, seed)
    for s in entity_names(n_entities):
        for r in rels:
            w.facts.append(Fact(s, r, rng.choice(RELATIONS[r]["values"])))
    return w


# --- reasoning suite ---------------------------------------------------------------------------


def arithmetic_problem(x: int, o1: str, y: int, o2: str, z: int) -> tuple[str, str]:
    """``Q: x o1 y o2 z ? A:`` and its worked answer ``x o1 y = a ; a o2 z = b # b``."""
    a = x + y if o1 == "+" else x - y
    b = a + z if o2 == "+" else a - z
    return f"Q: {x} {o1} {y} {o2} {z} ? A:", f"{x} {o1} {y} = {a} ; {a} {o2} {z} = {b} # {b}"


def list_problem(kind: str, items: list[int]) -> tuple[str, str]:
    """``Q: max|min of d d d ? A:`` and ``# v``."""
    v = max(items) if kind == "max" else min(items)
    return f"Q: {kind} of {' '.join(map(str, items))} ? A:", f"# {v}"


def reasoning_problems(seed: int = 0) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """All arithmetic problems (operands below ``N_OPERAND``) and 1,600 list problems, shuffled, as (train, held_out); 100 of
    each kind are held out."""
    rng = random.Random(10_000 + seed)
    arith = [
        arithmetic_problem(x, o1, y, o2, z)
        for x in range(N_OPERAND)
        for y in range(N_OPERAND)
        for z in range(N_OPERAND)
        for o1 in "+-"
        for o2 in "+-"
    ]
    rng.shuffle(arith)
    lists: dict[str, tuple[str, str]] = {}
    while len(lists) < 1600:
        items = [rng.randrange(10) for _ in range(rng.choice((3, 4, 5)))]
        p = list_problem(rng.choice(("max", "min")), items)
        lists[p[0]] = p
    lst = list(lists.values())
    return arith[100:] + lst[100:], arith[:100] + lst[:100]


# --- training documents -----------------------------------------------------------------------


def context_doc(facts: list[str], question: str, answer: str) -> str:
    """The context-following format the retrieval baseline prompts with."""
    return f"{CONTEXT} {' . '.join(facts)} . {QUESTION} {question} {answer}"


def context_prompt(facts: list[str], question: str) -> str:
    return f"{CONTEXT} {' . '.join(facts)} . {QUESTION} {question}"


def gate_prompt(fact: str, query: str) -> str:
    """The yes/no relevance question of the retrieval gate."""
    return f"{GATE_FACT} {fact} . {GATE_QUERY} {query} {GATE_ASK}"


def training_documents(world: World, *, n_context: int = 5000, n_gate: int = 4000,
                       fact_repeat: int = 16, seed: int = 0) -> list[str]:  # fmt: skip
    """Facts in every template and their 2-hop sentences (repeated ``fact_repeat`` times),
    context documents (half contradict memory, a third carry a distractor fact), relevance
    documents (half relevant) and the reasoning training split."""
    rng = random.Random(seed + 77)
    docs: list[str] = []
    for f in world.facts:
        for t in range(3):
            docs += [f.sentence(t)] * fact_repeat
        docs += [f"{f.hop_prompt()} {hop_answer(f.relation, f.value)}"] * fact_repeat
    for _ in range(n_context):
        f = rng.choice(world.facts)
        vals = RELATIONS[f.relation]["values"]
        v = f.value if rng.random() < 0.5 else rng.choice([x for x in vals if x != f.value])
        shown = [f.sentence(0, v)]
        if rng.random() < 1 / 3:
            g = rng.choice(world.facts)
            if g.subject != f.subject:
                shown.insert(rng.randrange(2), g.sentence(0))
        if rng.random() < 0.25:
            docs.append(context_doc(shown, f.hop_prompt(), hop_answer(f.relation, v)))
        else:
            docs.append(context_doc(shown, f.prompt(rng.randrange(3)), v))
    for _ in range(n_gate):
        f = rng.choice(world.facts)
        if rng.random() < 0.5:
            q = f.prompt(rng.randrange(3)) if rng.random() < 0.8 else f.hop_prompt()
            ans = "yes"
        else:  # hard negatives: same relation, other subject; or same subject, other relation
            same_rel = rng.random() < 0.5 or len(world.relations) == 1
            pool = [g for g in world.facts if (g.relation == f.relation) == same_rel
                    and (g.subject == f.subject) != same_rel]  # fmt: skip
            g = rng.choice(pool)
            q, ans = g.prompt(rng.randrange(3)), "no"
        docs.append(f"{gate_prompt(f.sentence(0), q)} {ans}")
    train, _ = reasoning_problems(seed)
    docs += [f"{p} {a}" for p, a in train]
    return docs


def vocabulary(world: World) -> list[str]:
    """Every word the world's documents (of any size) can contain, sorted."""
    words: set[str] = set(entity_names(world.n_entities))
    for spec in RELATIONS.values():
        words |= set(spec["values"]) | set(spec["hop"][1])
        for t in (*spec["templates"], spec["hop"][0]):
            words |= set(t.replace("{s}", "").split())
    words |= set(f"{CONTEXT} {QUESTION} {GATE_FACT} {GATE_QUERY} {GATE_ASK} yes no . ;".split())
    words |= {"Q:", "A:", "#", "=", "+", "-", "max", "min", "of", "?"}
    words |= {str(i) for i in range(-20, 30)}
    return sorted(words)
