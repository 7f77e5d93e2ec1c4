"""Tasks: a synthetic addition task for CPU runs and real math problems from a file or hub id.

Every task yields rows ``problem_id, question, answer`` (strings); the trainer turns them into the
one row schema shared by generation and verification rows.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from selfverify_rl.errors import SelfVerifyConfigError, SelfVerifyDataError

if TYPE_CHECKING:
    from datasets import Dataset

__all__ = ["ArithmeticTask", "check_rows", "load_math", "scratchpad"]

REQUIRED = ("problem_id", "question", "answer")


def scratchpad(a: int, b: int) -> str:
    """Right-to-left column addition trace, e.g. ``7+9=16 c1|4+8+1=13 c1|3+5+1=9|``."""
    da, db = str(a)[::-1], str(b)[::-1]
    steps, carry = [], 0
    for i in range(max(len(da), len(db))):
        x = int(da[i]) if i < len(da) else 0
        y = int(db[i]) if i < len(db) else 0
        terms = f"{x}+{y}" + (f"+{carry}" if carry else "")
        s = x + y + carry
        carry = s // 10
        steps.append(f"{terms}={s}" + (" c1" if carry else ""))
    if carry:
        steps.append("c1")
    return "|".join(steps) + "|"


@dataclass(frozen=True)
class ArithmeticTask:
    """Synthetic ``a+b`` with ``digits``-digit operands (the CPU stand-in for math problems).

    ``sample(n)`` draws distinct problems with a seeded RNG; ``problem_id`` is the question text,
    so two samples of the same task share ids for the same sum.
    """

    digits: int = 3
    n_operands: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.digits <= 9:
            raise SelfVerifyConfigError(f"digits={self.digits}: use 1..9")
        if self.n_operands != 2:
            raise SelfVerifyConfigError(
                f"n_operands={self.n_operands}: only 2-operand addition is implemented"
            )

    def problems(self, n: int, *, exclude: Iterable[str] = ()) -> list[dict[str, str]]:
        """``n`` distinct problems as dicts, skipping questions in ``exclude``."""
        lo, hi = 10 ** (self.digits - 1), 10**self.digits - 1
        if self.digits == 1:
            lo = 0
        space = (hi - lo + 1) ** 2
        skip = set(exclude)
        if n > space - len(skip):
            raise SelfVerifyConfigError(
                f"n={n} exceeds the {space - len(skip)} distinct {self.digits}-digit problems left"
            )
        rng = random.Random(self.seed)
        seen: set[str] = set()
        out = []
        while len(out) < n:
            a, b = rng.randint(lo, hi), rng.randint(lo, hi)
            q = f"{a}+{b}"
            if q in seen or q in skip:
                continue
            seen.add(q)
            out.append({"problem_id": q, "question": q, "answer": str(a + b)})
        return out

    def sample(self, n: int, *, exclude: Iterable[str] = ()) -> Dataset:
        """``n`` distinct problems as a ``datasets.Dataset`` (``problem_id, question, answer``)."""
        from datasets import Dataset

        return Dataset.from_list(self.problems(n, exclude=exclude))

    @staticmethod
    def solution(question: str) -> str:
        """The worked scratchpad plus boxed answer for ``"a+b"``."""
        a, b = (int(x) for x in question.split("+"))
        return scratchpad(a, b) + "\\boxed{" + str(a + b) + "}"


def check_rows(rows: Sequence[Mapping[str, Any]], *, where: str = "data") -> list[dict[str, Any]]:
    """Validate task rows: the required columns exist and a ``problem_id`` never has two answers.

    Returns the rows as plain dicts with string ``problem_id``/``question``/``answer``.
    """
    if not rows:
        raise SelfVerifyDataError(f"{where}: no rows")
    answers: dict[str, str] = {}
    out = []
    for i, row in enumerate(rows):
        missing = [k for k in REQUIRED if k not in row or row[k] is None]
        if missing:
            raise SelfVerifyDataError(
                f"{where}: row {i} lacks {missing} (has {sorted(row)}); every row needs "
                f"{list(REQUIRED)}"
            )
        pid, ans = str(row["problem_id"]), str(row["answer"])
        if answers.setdefault(pid, ans) != ans:
            raise SelfVerifyDataError(
                f"{where}: problem_id {pid!r} has two answers ({answers[pid]!r} and {ans!r}); "
                "give each problem one ground truth or distinct ids"
            )
        out.append({**row, "problem_id": pid, "question": str(row["question"]), "answer": ans})
    return out


def load_math(
    path_or_hf_id: str,
    question_key: str = "problem",
    answer_key: str = "answer",
    *,
    split: str = "train",
    id_key: str | None = None,
) -> Dataset:
    """Real math problems from a local jsonl/json/parquet file or a hub dataset id.

    ``question_key``/``answer_key`` name the source columns; ``id_key`` (default: the row index)
    names the problem id. Returns a ``Dataset`` with ``problem_id, question, answer``.
    """
    from datasets import Dataset, load_dataset

    p = Path(path_or_hf_id)
    if p.exists():
        fmt = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}.get(p.suffix)
        if fmt is None:
            raise SelfVerifyDataError(f"{p}: use a .jsonl, .json or .parquet file")
        ds = load_dataset(fmt, data_files=str(p), split="train")
    else:
        ds = load_dataset(path_or_hf_id, split=split)
    for key in (question_key, answer_key):
        if key not in ds.column_names:
            raise SelfVerifyDataError(
                f"{path_or_hf_id}: no column {key!r} (columns: {ds.column_names}); pass "
                "question_key/answer_key"
            )
    rows = [
        {
            "problem_id": str(r[id_key]) if id_key else str(i),
            "question": str(r[question_key]),
            "answer": str(r[answer_key]),
        }
        for i, r in enumerate(ds)
    ]
    return Dataset.from_list(check_rows(rows, where=str(path_or_hf_id)))
