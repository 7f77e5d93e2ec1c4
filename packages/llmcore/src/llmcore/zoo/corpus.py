"""Synthetic corpora for the tiny-model zoo.

A :class:`Corpus` is plain text documents (one training example each) plus a held-out split
for the recipe's quality gate. Method packages build their own (facts, worked arithmetic,
formal languages, task formats) and pass them to a :class:`~llmcore.zoo.Recipe`; the generators
below are seeded and deterministic, so a corpus hashes the same on every machine.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from llmcore.errors import ConfigError


@dataclass(frozen=True)
class Corpus:
    """Training and held-out documents; ``fingerprint`` hashes both (it keys the zoo cache)."""

    name: str
    train: tuple[str, ...]
    eval: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.train:
            raise ConfigError(f"corpus {self.name!r} has no training documents")
        object.__setattr__(self, "train", tuple(self.train))
        object.__setattr__(self, "eval", tuple(self.eval) or tuple(self.train[:64]))

    @property
    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for split in (self.train, self.eval):
            for doc in split:
                h.update(doc.encode("utf-8"))
                h.update(b"\x00")
            h.update(b"\x01")
        return h.hexdigest()

    @classmethod
    def from_texts(
        cls, name: str, texts: Sequence[str], *, eval_fraction: float = 0.05, seed: int = 0
    ) -> Corpus:
        """Split ``texts`` into train and held-out documents with a seeded shuffle."""
        if not 0.0 <= eval_fraction < 1.0:
            raise ConfigError(f"eval_fraction must be in [0, 1), got {eval_fraction}")
        docs = list(texts)
        random.Random(seed).shuffle(docs)
        n_eval = max(1, int(len(docs) * eval_fraction)) if eval_fraction > 0 else 0
        return cls(name, tuple(docs[n_eval:]), tuple(docs[:n_eval]))

    def __add__(self, other: Corpus) -> Corpus:
        return Corpus(f"{self.name}+{other.name}", self.train + other.train, self.eval + other.eval)


def arithmetic_corpus(n: int = 4000, *, max_operand: int = 99, seed: int = 0) -> Corpus:
    """Additions with worked digit-by-digit steps, e.g. ``"47+38: 7+8=15 c1, 4+3+1=8 ; 85"``."""
    rng = random.Random(seed)
    docs = []
    for _ in range(n):
        a, b = rng.randint(0, max_operand), rng.randint(0, max_operand)
        steps, carry = [], 0
        da, db = str(a)[::-1], str(b)[::-1]
        for i in range(max(len(da), len(db))):
            x = int(da[i]) if i < len(da) else 0
            y = int(db[i]) if i < len(db) else 0
            s = x + y + carry
            steps.append(f"{x}+{y}{'+1' if carry else ''}={s}{' c1' if s >= 10 else ''}")
            carry = int(s >= 10)
        docs.append(f"{a}+{b}: {', '.join(steps)} ; {a + b}")
    return Corpus.from_texts("arithmetic", docs, seed=seed)


_SYLLABLES = ("ka", "zo", "ri", "vel", "mun", "tor", "sa", "quel", "dri", "fen", "lo", "bar")
_RELATIONS = ("capital", "river", "language", "founder", "color")


def _name(rng: random.Random, k: int = 2) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(k)).capitalize()


def facts_corpus(
    n_entities: int = 150, *, repeats: int = 8, seed: int = 0
) -> tuple[Corpus, dict[str, dict[str, str]]]:
    """Facts about fictitious countries (``"The river of Kazo is Velmun."``), each stated
    ``repeats`` times across the corpus. Returns the corpus and the fact table
    ``{entity: {relation: value}}`` so a recipe or test can check recall."""
    if not 0 < n_entities <= len(_SYLLABLES) ** 3 // 2:
        raise ConfigError(
            f"n_entities must be in [1, {len(_SYLLABLES) ** 3 // 2}], got {n_entities}"
        )
    rng = random.Random(seed)
    table: dict[str, dict[str, str]] = {}
    while len(table) < n_entities:
        ent = _name(rng, 3)
        if ent not in table:
            table[ent] = {rel: _name(rng, rng.choice((1, 2))) for rel in _RELATIONS}
    docs = [
        f"The {rel} of {ent} is {val}."
        for ent, facts in table.items()
        for rel, val in facts.items()
        for _ in range(repeats)
    ]
    rng.shuffle(docs)
    held = sorted({d for d in docs})[:: max(1, len(set(docs)) // 64)]
    # Facts are meant to be memorised: the held-out split is a sample of seen facts.
    return Corpus("facts", tuple(docs), tuple(held)), table


def dyck_corpus(n: int = 3000, *, max_depth: int = 4, max_len: int = 24, seed: int = 0) -> Corpus:
    """Balanced strings over two bracket pairs (Dyck-2), space separated."""
    rng = random.Random(seed)
    pairs = (("(", ")"), ("[", "]"))
    docs = []
    for _ in range(n):
        out, stack = [], []
        target = rng.randrange(2, max_len + 1, 2)
        while len(out) + len(stack) < target or stack:
            room = target - len(out) - len(stack)
            if stack and (len(stack) >= max_depth or room <= 0 or rng.random() < 0.45):
                out.append(stack.pop())
            else:
                o, c = rng.choice(pairs)
                out.append(o)
                stack.append(c)
        docs.append(" ".join(out))
    return Corpus.from_texts("dyck", docs, seed=seed)


def default_corpus(seed: int = 0) -> Corpus:
    """The zoo's default mix: worked arithmetic, fictitious facts and Dyck-2 strings."""
    facts, _ = facts_corpus(seed=seed)
    return arithmetic_corpus(seed=seed) + facts + dyck_corpus(seed=seed)
