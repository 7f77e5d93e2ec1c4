"""Demonstration selectors/orderers sharing one protocol:
``select(pool, query, k, seed) -> list[int]`` (pool positions, in prompt order).

Fixed-block selectors (random, original, CDS, high curvature, complexity, understandability)
ignore ``query`` and give one block for every test question; KATE and dissimilar pick per query.
Random, original and CDS work on the first ``k`` demos of the (already shuffled) pool: CDS only
orders, it does not select.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from cds_icl.errors import CDSInputError, unknown_choice
from cds_icl.pool import DemoPool

SELECTORS = ("random", "original", "kate", "dissimilar", "complexity", "cds", "high_curvature",
             "understandability")  # fmt: skip


def check_k(pool: DemoPool, k: int) -> None:
    """``1 <= k <= len(pool)`` or a :class:`CDSInputError`."""
    if not isinstance(k, int | np.integer) or not 1 <= int(k) <= len(pool):
        raise CDSInputError(f"k must be an integer in [1, {len(pool)}] (the pool size), got {k!r}")


class Selector(Protocol):
    """What every selector implements."""

    fixed_block: bool

    def select(self, pool: DemoPool, query: str | None, k: int, seed: int) -> list[int]: ...


class RandomSelector:
    """The first ``k`` pool demos in a seeded random order (the paper's "shuffle")."""

    fixed_block = True
    name = "random"

    def select(self, pool: DemoPool, query: str | None, k: int, seed: int) -> list[int]:
        check_k(pool, k)
        idx = list(range(k))
        np.random.default_rng(seed).shuffle(idx)
        return [int(i) for i in idx]


class OriginalSelector:
    """The first ``k`` pool demos in pool order."""

    fixed_block = True
    name = "original"

    def select(self, pool: DemoPool, query: str | None, k: int, seed: int) -> list[int]:
        check_k(pool, k)
        return list(range(k))


class _EmbeddingCache:
    def __init__(self, embedder: Callable[[Sequence[str]], np.ndarray]) -> None:
        self.embedder = embedder
        self._cache: dict[int, np.ndarray] = {}

    def pool_embeddings(self, pool: DemoPool) -> np.ndarray:
        key = id(pool)
        if key not in self._cache:
            self._cache[key] = np.asarray(self.embedder(pool.texts()), dtype=np.float64)
        return self._cache[key]


class KATESelector(_EmbeddingCache):
    """KATE (Liu et al., 2022): the ``k`` pool demos most cosine-similar to the query, ordered
    by ascending similarity so the most similar sits right before the query (``reverse=False``:
    most similar first). Ties break by pool position."""

    fixed_block = False
    name = "kate"
    farthest = False

    def __init__(
        self, embedder: Callable[[Sequence[str]], np.ndarray], reverse: bool = True
    ) -> None:
        super().__init__(embedder)
        self.reverse = reverse

    def similarities(self, pool: DemoPool, query: str) -> np.ndarray:
        E = self.pool_embeddings(pool)
        q = np.asarray(self.embedder([query]), dtype=np.float64)[0]
        nE = np.linalg.norm(E, axis=1) * max(np.linalg.norm(q), 1e-300)
        return (E @ q) / np.where(nE > 0, nE, 1.0)

    def select(self, pool: DemoPool, query: str | None, k: int, seed: int) -> list[int]:
        check_k(pool, k)
        if query is None:
            raise CDSInputError(f"{self.name} selects per query: pass the query text")
        sim = self.similarities(pool, query)
        key = sim if self.farthest else -sim
        top = np.lexsort((np.arange(len(pool)), key))[:k]  # k best, ties by position
        top = sorted(top.tolist(), key=lambda i: (sim[i], -i))  # ascending similarity
        if not self.reverse:
            top = top[::-1]
        return [int(i) for i in top]


class DissimilarSelector(KATESelector):
    """The ``k`` least similar pool demos (the paper's ablation), same ordering rule."""

    name = "dissimilar"
    farthest = True


def complexity(solution: str) -> int:
    """Reasoning steps (Fu et al., 2023): non-empty lines; a one-line solution counts its
    sentences instead."""
    lines = [ln for ln in solution.splitlines() if ln.strip()]
    if len(lines) > 1:
        return len(lines)
    return max(1, len([s for s in re.split(r"(?<=[.!?])\s+", solution.strip()) if s.strip()]))


class ComplexitySelector:
    """Complexity-based prompting: the ``k`` demos with the most reasoning steps (ties by
    position), in ascending (default) or descending complexity."""

    fixed_block = True
    name = "complexity"

    def __init__(self, order: str = "asc") -> None:
        if order not in ("asc", "desc"):
            raise unknown_choice("complexity order", order, ("asc", "desc"))
        self.order = order

    def select(self, pool: DemoPool, query: str | None, k: int, seed: int) -> list[int]:
        check_k(pool, k)
        c = [complexity(d.solution) for d in pool]
        top = sorted(range(len(pool)), key=lambda i: (-c[i], i))[:k]
        top = sorted(top, key=lambda i: (c[i], i))
        return top if self.order == "asc" else top[::-1]


class CDSSelector(_EmbeddingCache):
    """CDS (or its ``high_curvature`` ablation) ordering of the first ``k`` pool demos."""

    fixed_block = True

    def __init__(self, embedder: Callable[[Sequence[str]], np.ndarray], strategy: str = "cds",
                 n_starts: int = 10) -> None:  # fmt: skip
        from cds_icl.tsp import STRATEGIES

        if strategy not in STRATEGIES:
            raise unknown_choice("strategy", strategy, STRATEGIES)
        super().__init__(embedder)
        self.strategy, self.n_starts, self.name = strategy, n_starts, strategy
        self.last_score: float | None = None

    def select(self, pool: DemoPool, query: str | None, k: int, seed: int) -> list[int]:
        from cds_icl.tsp import cds_order

        check_k(pool, k)
        E = self.pool_embeddings(pool)[:k]
        order, score = cds_order(E, self.strategy, n_starts=self.n_starts)
        self.last_score = float(score)
        return [int(i) for i in order]


class UnderstandabilitySelector:
    """Extension (not in the paper): the ``k`` demos with the lowest mean token NLL of their
    solution under the target model (:func:`cds_icl.understand.understandability`), in pool
    order."""

    fixed_block = True
    name = "understandability"

    def __init__(self, model: Any, tokenizer: Any, batch_size: int = 8) -> None:
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self._scores: dict[int, list[float]] = {}

    def scores(self, pool: DemoPool) -> list[float]:
        from cds_icl.understand import understandability

        if id(pool) not in self._scores:
            self._scores[id(pool)] = understandability(
                self.model, self.tokenizer, list(pool), batch_size=self.batch_size
            )
        return self._scores[id(pool)]

    def select(self, pool: DemoPool, query: str | None, k: int, seed: int) -> list[int]:
        check_k(pool, k)
        u = self.scores(pool)
        return sorted(sorted(range(len(pool)), key=lambda i: (u[i], i))[:k])


def make_selector(name: str, embedder: Any = None, model: Any = None, tokenizer: Any = None) -> Any:
    """A selector by name (one of :data:`SELECTORS`)."""
    if name == "random":
        return RandomSelector()
    if name == "original":
        return OriginalSelector()
    if name == "complexity":
        return ComplexitySelector()
    if name in ("kate", "dissimilar", "cds", "high_curvature"):
        if embedder is None:
            raise CDSInputError(f"selector {name!r} needs an embedder")
        if name == "kate":
            return KATESelector(embedder)
        if name == "dissimilar":
            return DissimilarSelector(embedder)
        return CDSSelector(embedder, strategy=name)
    if name == "understandability":
        if model is None or tokenizer is None:
            raise CDSInputError("selector 'understandability' needs the target model and tokenizer")
        return UnderstandabilitySelector(model, tokenizer)
    raise unknown_choice("selector", name, SELECTORS)


class OrderSelector:
    """A fixed order read from an order file: its first ``k`` positions."""

    fixed_block = True

    def __init__(self, order: Sequence[int], name: str = "order") -> None:
        self.order, self.name = [int(i) for i in order], name

    def select(self, pool: DemoPool, query: str | None, k: int, seed: int) -> list[int]:
        check_k(pool, k)
        if k > len(self.order):
            raise CDSInputError(f"k = {k} exceeds the order's length {len(self.order)}")
        return self.order[:k]
