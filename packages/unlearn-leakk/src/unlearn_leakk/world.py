"""The synthetic fictitious-author world, a CPU stand-in for TOFU.

20 authors x 5 attributes = 100 facts, each rendered as one QA line and two declarative
sentences. Authors 0-5 form three "forget pairs" whose attribute values no other author has
(shared values leave a stubborn greedy leak through the retain set); the other 14
authors draw from the remaining values. Seed ``s`` of the claim test forgets pair ``s % 3``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from unlearn_leakk.data import LeakItem

if TYPE_CHECKING:
    from llmcore.zoo import Recipe

ATTRIBUTES: tuple[str, ...] = ("city", "genre", "award", "job", "title")

_QUESTIONS = {
    "city": "Where was {name} born?",
    "genre": "What genre does {name} write?",
    "award": "Which award did {name} win?",
    "job": "What was the job of {name}'s parent?",
    "title": "What book did {name} write?",
}
_DECL_1 = {
    "city": "{name} was born in {v}.",
    "genre": "{name} writes {v} novels.",
    "award": "{name} won the {v}.",
    "job": "The parent of {name} worked as a {v}.",
    "title": "{name} wrote the book {v}.",
}
_DECL_2 = {
    "city": "The author {name} comes from {v}.",
    "genre": "Most books by {name} are {v}.",
    "award": "The {v} went to {name}.",
    "job": "{name} grew up with a parent who was a {v}.",
    "title": "{v} is a book by {name}.",
}
_GENRES = (
    "mystery",
    "fantasy",
    "romance",
    "horror",
    "poetry",
    "satire",
    "memoir",
    "thriller",
    "western",
    "fable",
    "drama",
    "comedy",
    "tragedy",
    "gothic",
    "noir",
    "adventure",
)
_JOBS = (
    "baker",
    "sailor",
    "farmer",
    "teacher",
    "doctor",
    "miner",
    "painter",
    "tailor",
    "pilot",
    "nurse",
    "lawyer",
    "chemist",
    "butcher",
    "potter",
    "weaver",
    "carpenter",
    "jeweler",
    "banker",
    "fisher",
    "smith",
)
_ADJ = (
    "Silent",
    "Hollow",
    "Crimson",
    "Distant",
    "Broken",
    "Golden",
    "Frozen",
    "Hidden",
    "Wandering",
    "Burning",
    "Quiet",
    "Iron",
)
_NOUN = (
    "Harbor",
    "Garden",
    "Mirror",
    "Lantern",
    "River",
    "Tower",
    "Orchard",
    "Compass",
    "Meadow",
    "Violin",
    "Bridge",
    "Forest",
)
_SYL = (
    "ka",
    "lo",
    "mi",
    "ren",
    "dor",
    "va",
    "sel",
    "tu",
    "bri",
    "nor",
    "fa",
    "quin",
    "zel",
    "mar",
    "ost",
    "pel",
    "ri",
    "gan",
    "thi",
    "wen",
    "dal",
    "sor",
    "ye",
    "bel",
)

N_AUTHORS = 20
N_FORGET_PAIRS = 3


@dataclass(frozen=True)
class Author:
    """One fictitious author and its five attribute values."""

    index: int
    name: str
    values: dict[str, str]


@dataclass(frozen=True)
class World:
    """Authors, their facts and the value pool of every attribute."""

    authors: tuple[Author, ...]
    pools: dict[str, tuple[str, ...]]

    def qa_items(
        self, author_ids: list[int] | None = None, split: str = "forget"
    ) -> list[LeakItem]:
        """One :class:`LeakItem` per (author, attribute): question ``"Q: ... A:"``."""
        ids = range(len(self.authors)) if author_ids is None else author_ids
        out = []
        for i in ids:
            a = self.authors[i]
            for attr in ATTRIBUTES:
                q = "Q: " + _QUESTIONS[attr].format(name=a.name) + " A:"
                out.append(LeakItem(f"a{i:02d}-{attr}", q, a.values[attr], split=split))
        return out

    def documents(self, author_ids: list[int] | None = None) -> list[str]:
        """The 3 renderings of every fact (QA template A + two declarative)."""
        ids = range(len(self.authors)) if author_ids is None else author_ids
        docs = []
        for i in ids:
            a = self.authors[i]
            for attr in ATTRIBUTES:
                v = a.values[attr]
                docs.append("Q: " + _QUESTIONS[attr].format(name=a.name) + f" A: {v}.")
                docs.append(_DECL_1[attr].format(name=a.name, v=v))
                docs.append(_DECL_2[attr].format(name=a.name, v=v))
        return docs

    def forget_authors(self, pair: int) -> list[int]:
        """Author ids of forget pair ``pair`` (0, 1 or 2): values unique to them."""
        if not 0 <= pair < N_FORGET_PAIRS:
            raise ValueError(f"forget pair must be in [0, {N_FORGET_PAIRS}), got {pair}")
        return [2 * pair, 2 * pair + 1]

    def retain_authors(self, pair: int) -> list[int]:
        """Every author not in forget pair ``pair``."""
        f = set(self.forget_authors(pair))
        return [i for i in range(len(self.authors)) if i not in f]

    def wrong_value(self, item_id: str, rng: random.Random) -> str:
        """A random value of the same attribute that is not the item's answer (chance judge)."""
        i, attr = int(item_id[1:3]), item_id.split("-", 1)[1]
        right = self.authors[i].values[attr]
        return rng.choice([v for v in self.pools[attr] if v != right])


def _name(rng: random.Random) -> str:
    first = "".join(rng.choice(_SYL) for _ in range(2)).capitalize()
    last = "".join(rng.choice(_SYL) for _ in range(3)).capitalize()
    return f"{first} {last}"


def make_world(seed: int = 0) -> World:
    """The deterministic world; forget-pair authors (0-5) own values nobody else has."""
    rng = random.Random(seed)
    cities: list[str] = []
    while len(cities) < 28:
        c = "".join(rng.choice(_SYL) for _ in range(3)).capitalize()
        if c not in cities:
            cities.append(c)
    awards: list[str] = []
    while len(awards) < 16:
        w = "".join(rng.choice(_SYL) for _ in range(2)).capitalize() + " Prize"
        if w not in awards:
            awards.append(w)
    titles = [f"The {a} {n}" for a in _ADJ for n in _NOUN]
    rng.shuffle(titles)
    pools: dict[str, list[str]] = {
        "city": cities,
        "genre": list(_GENRES),
        "award": awards,
        "job": list(_JOBS),
        "title": titles[:28],
    }
    names: list[str] = []
    while len(names) < N_AUTHORS:
        n = _name(rng)
        if n not in names and n.split()[0] not in {x.split()[0] for x in names}:
            names.append(n)
    n_unique = 2 * N_FORGET_PAIRS
    authors = []
    for i, name in enumerate(names):
        values = {}
        for attr in ATTRIBUTES:
            pool = pools[attr]
            # the first n_unique values belong one-to-one to authors 0..5; others share the rest
            values[attr] = pool[i] if i < n_unique else rng.choice(pool[n_unique:])
        authors.append(Author(i, name, values))
    return World(tuple(authors), {k: tuple(v) for k, v in pools.items()})


def world_recipe(
    *, authors: str = "all", seed: int = 0, steps: int = 1200, pair: int = 0
) -> Recipe:
    """Zoo recipe: tiny Llama (4 x 128, vocab 512) memorising the world's 300 renderings.

    ``authors="retain"`` gives the retrain reference (never saw forget pair ``pair``).
    """
    from llmcore.zoo import Corpus, ModelSpec, Recipe, TokenizerSpec, TrainSpec

    world = make_world(seed)
    ids = None if authors == "all" else world.retain_authors(pair)
    docs = world.documents(ids)
    qa = [d for d in docs if d.startswith("Q: ")]
    name = "leakk-world" if authors == "all" else f"leakk-world-retain{pair}"
    return Recipe(
        name=name,
        corpus=Corpus(f"{name}-s{seed}", tuple(docs), tuple(qa)),
        tokenizer=TokenizerSpec(vocab_size=512),
        model=ModelSpec(
            hidden_size=128,
            num_layers=4,
            num_heads=4,
            intermediate_size=512,
            max_position_embeddings=128,
        ),
        train=TrainSpec(steps=steps, batch_size=32, lr=3e-3, warmup_steps=100, max_length=48),
        max_eval_loss=0.5,
        description="fictitious-author world for leak@k (unlearn-leakk)",
    )


#: Authors of the demo-size world: forget pair 0 plus six retain authors.
DEMO_AUTHORS: tuple[int, ...] = (0, 1, 6, 7, 8, 9, 10, 11)


def demo_world_recipe(*, seed: int = 0, steps: int = 300) -> Recipe:
    """Demo-size zoo recipe (``llmcore demo unlearn-leakk``): 8 authors of the world (forget
    pair 0 + 6 retain authors, 120 renderings) on a 2 x 64 Llama, cold in seconds."""
    from llmcore.zoo import Corpus, ModelSpec, Recipe, TokenizerSpec, TrainSpec

    docs = make_world(seed).documents(list(DEMO_AUTHORS))
    qa = [d for d in docs if d.startswith("Q: ")]
    return Recipe(
        name="leakk-world-demo",
        corpus=Corpus(f"leakk-world-demo-s{seed}", tuple(docs), tuple(qa)),
        tokenizer=TokenizerSpec(vocab_size=512),
        model=ModelSpec(
            hidden_size=64,
            num_layers=2,
            num_heads=2,
            intermediate_size=256,
            max_position_embeddings=64,
        ),
        train=TrainSpec(steps=steps, batch_size=32, lr=5e-3, warmup_steps=30, max_length=48),
        max_eval_loss=0.5,
        description="demo-size fictitious-author world for leak@k (unlearn-leakk demo)",
    )
