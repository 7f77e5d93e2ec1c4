"""Demonstration pools and CDS order files.

Pool semantics follow the paper's pipeline: the first ``n`` training items (``n = 2^r``),
shuffled by ``numpy.random.default_rng(seed).shuffle`` (default seed 71); order indices refer to
positions in that shuffled list.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cds_icl.errors import CDSInputError

log = logging.getLogger(__name__)
DEFAULT_SEED = 71
EMBED_TEMPLATE = "Problem:\n{problem}\nSolution:\n{solution}"


@dataclass
class Demo:
    """One demonstration: a problem, its worked solution and the final answer (None if none)."""

    problem: str
    solution: str
    answer: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


def gold_answer(solution: str, kind: str = "math") -> str | None:
    """The gold answer in a reference solution: the last ``\\boxed{}`` (``kind="math"``) or the
    text after ``####`` (``kind="gsm8k"``); None when there is none."""
    if kind == "gsm8k":
        if "####" not in solution:
            return None
        ans = solution.split("####")[-1].strip().replace(",", "")
        return ans or None
    from llmcore.metrics import last_boxed, normalize_math_answer

    box = last_boxed(solution)
    return normalize_math_answer(box) if box is not None else None


class DemoPool:
    """An ordered list of :class:`Demo` with unique ids (``meta["idx"]``)."""

    def __init__(self, demos: Sequence[Demo], *, seed: int | None = None) -> None:
        demos = list(demos)
        if not demos:
            raise CDSInputError("the demonstration pool is empty; give at least one item")
        ids = [d.meta.get("idx", i) for i, d in enumerate(demos)]
        seen: set[Any] = set()
        dup = sorted({str(i) for i in ids if i in seen or seen.add(i)})  # type: ignore[func-returns-value]
        if dup:
            raise CDSInputError(
                f"duplicate demonstration ids in the pool: {dup[:10]}; ids must be unique"
            )
        for i, d in zip(ids, demos, strict=True):
            d.meta.setdefault("idx", i)
        self.demos = demos
        self.seed = seed

    def __len__(self) -> int:
        return len(self.demos)

    def __getitem__(self, i: int) -> Demo:
        return self.demos[i]

    def __iter__(self):
        return iter(self.demos)

    @property
    def ids(self) -> list[Any]:
        return [d.meta["idx"] for d in self.demos]

    @classmethod
    def from_dataset(
        cls,
        ds: Iterable[dict[str, Any]],
        problem_col: str = "problem",
        solution_col: str = "solution",
        n: int | None = None,
        seed: int | None = DEFAULT_SEED,
        answer_kind: str = "math",
        answer_col: str | None = None,
        source: str = "reference",
    ) -> DemoPool:
        """The first ``n`` rows, shuffled with ``default_rng(seed).shuffle`` (no shuffle when
        ``seed`` is None). Rows without a parsable gold answer are dropped (count logged)."""
        rows = []
        for i, row in enumerate(ds):
            if n is not None and i >= n:
                break
            rows.append(row)
        if n is not None and len(rows) < n:
            raise CDSInputError(f"the dataset has {len(rows)} rows, fewer than n = {n}")
        pos = list(range(len(rows)))
        if seed is not None:
            np.random.default_rng(seed).shuffle(pos)
        demos, dropped = [], 0
        for p in pos:
            row = rows[p]
            sol = str(row[solution_col])
            ans = str(row[answer_col]) if answer_col else gold_answer(sol, answer_kind)
            if ans is None:
                dropped += 1
                continue
            meta = {"idx": row.get("idx", p), "source": source}
            demos.append(Demo(str(row[problem_col]), sol, ans, meta))
        if dropped:
            log.warning("dropped %d pool item(s) without a parsable gold answer", dropped)
        if not demos:
            raise CDSInputError("no pool item has a parsable gold answer; check solution_col")
        return cls(demos, seed=seed)

    def texts(self, template: str = EMBED_TEMPLATE) -> list[str]:
        """Each demo rendered with ``template`` (fields ``problem``, ``solution``)."""
        return [template.format(problem=d.problem, solution=d.solution) for d in self.demos]

    def subset(self, positions: Sequence[int]) -> DemoPool:
        """A pool of the demos at ``positions`` (in that order)."""
        return DemoPool([self.demos[i] for i in positions], seed=self.seed)

    def to_jsonl(self, path: str | Path) -> None:
        """Rows ``{idx, problem, solution, answer, source, correct?, ...meta}``."""
        from llmcore.data import write_jsonl

        rows = []
        for d in self.demos:
            row = {"idx": d.meta["idx"], "problem": d.problem, "solution": d.solution,
                   "answer": d.answer, "source": d.meta.get("source", "reference")}  # fmt: skip
            row.update({k: v for k, v in d.meta.items() if k not in row})
            rows.append(row)
        write_jsonl(path, rows)

    @classmethod
    def from_jsonl(cls, path: str | Path) -> DemoPool:
        """Read a pool written by :meth:`to_jsonl` (or any rows with problem/solution)."""
        from llmcore.data import read_jsonl

        demos = []
        for i, row in enumerate(read_jsonl(path)):
            if "problem" not in row or "solution" not in row:
                raise CDSInputError(f"{path}: row {i + 1} lacks 'problem' or 'solution'")
            meta = {k: v for k, v in row.items() if k not in ("problem", "solution", "answer")}
            meta.setdefault("idx", i)
            demos.append(Demo(row["problem"], row["solution"], row.get("answer"), meta))
        return cls(demos)


@dataclass
class OrderFile:
    """A demonstration order over a pool: ``{order, score, strategy, embed, seed, n}``."""

    order: list[int]
    score: float
    strategy: str
    embed: str
    seed: int | None
    n: int

    def save(self, path: str | Path) -> None:
        from llmcore.data import atomic_write_json

        atomic_write_json(path, self.__dict__ | {"args": self.official_args()})

    def official_args(self) -> dict[str, Any]:
        r = int(np.log2(self.n)) if self.n > 0 and self.n & (self.n - 1) == 0 else None
        return {"r": r, "seed": self.seed, "strategy": self.strategy, "embed_model": self.embed}

    def official_name(self, subtask: str) -> str:
        """The reference layout's file name ``{subtask}_r{r}_seed{seed}_{strategy}_{embed}.json``."""
        r = self.official_args()["r"]
        return f"{subtask}_r{r}_seed{self.seed}_{self.strategy}_{self.embed}.json"

    @classmethod
    def load(cls, path: str | Path) -> OrderFile:
        """Read our layout or the reference one (``{order, score, args: {r, seed, ...}}``)."""
        obj = json.loads(Path(path).read_text())
        if "order" not in obj:
            raise CDSInputError(f"{path}: not an order file (no 'order' key)")
        args = obj.get("args") or {}
        n = obj.get("n") or (
            2 ** int(args["r"]) if args.get("r") is not None else len(obj["order"])
        )
        return cls(
            order=[int(i) for i in obj["order"]],
            score=float(obj.get("score", 0.0)),
            strategy=obj.get("strategy") or args.get("strategy", "cds"),
            embed=obj.get("embed") or args.get("embed_model", "unknown"),
            seed=obj.get("seed", args.get("seed")),
            n=int(n),
        )

    def check(self, pool: DemoPool) -> None:
        """Refuse an order whose ``n``/``seed``/indices do not match ``pool``."""
        if self.n != len(pool):
            raise CDSInputError(
                f"order file is for n = {self.n} demos but the pool has {len(pool)}; "
                "rebuild the order for this pool (cds-icl order)"
            )
        if pool.seed is not None and self.seed is not None and self.seed != pool.seed:
            raise CDSInputError(
                f"order file was built on a pool shuffled with seed {self.seed}, this pool used "
                f"seed {pool.seed}; rebuild the order or the pool with the same seed"
            )
        if sorted(self.order) != list(range(len(self.order))) or len(self.order) > len(pool):
            raise CDSInputError("order file's 'order' is not a permutation of pool positions")
