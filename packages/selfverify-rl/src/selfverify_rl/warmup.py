"""Warm-up corpus and SFT for the tiny CPU model (a stand-in for an instruct model's prior).

The corpus deliberately produces "decent generation, weak self-verification": (a) generation
scratchpads ending in ``\\boxed{sum}``; (b) verification responses in two styles, *recompute*
(the scratchpad, a comparison with the candidate, the correct verdict) and *verdict-only* (just a
boxed verdict drawn with a Yes bias, independent of correctness). Greedy decoding follows the
majority verdict-only style, so verification starts near chance; RL on verification can discover
that recomputing earns reward. This is an engineered mechanism, not an emergent one.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Any

from selfverify_rl.prompts import generation_prompt, verification_prompt
from selfverify_rl.tasks import ArithmeticTask, scratchpad

__all__ = [
    "WarmupSpec",
    "recompute_response",
    "warmup_corpus",
    "wrong_answer",
]


@dataclass(frozen=True)
class WarmupSpec:
    """Warm-up corpus and SFT settings (all enter the fixture's cache key)."""

    digits: int = 2
    n_docs: int = 6000
    verify_fraction: float = 0.5
    """Share of verification documents in the corpus."""
    recompute_share: float = 0.4
    """Among verification documents: recompute style (the rest is verdict-only)."""
    yes_bias: float = 0.8
    """Verdict-only documents say Yes with this probability, whatever the truth."""
    steps: int = 300
    batch_size: int = 32
    lr: float = 3e-3
    hidden_size: int = 128
    num_layers: int = 2
    seed: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def wrong_answer(a: int, b: int, rng: random.Random) -> int:
    """A plausible wrong sum: a dropped carry, one digit off by one, or off by 10/100."""
    s = a + b
    for _ in range(10):
        kind = rng.random()
        if kind < 0.4:
            da, db = str(a)[::-1], str(b)[::-1]
            digits = [
                (int(da[i]) if i < len(da) else 0) + (int(db[i]) if i < len(db) else 0)
                for i in range(max(len(da), len(db)))
            ]
            w = int("".join(str(d % 10) for d in digits)[::-1])
        elif kind < 0.8:
            k = rng.randrange(len(str(s)))
            w = s + rng.choice((-1, 1)) * 10**k
        else:
            w = s + rng.choice((-100, -10, 10, 100))
        if w != s and w >= 0:
            return w
    return s + 1


def recompute_response(question: str, candidate: str) -> str:
    """Recompute-style verification: the scratchpad, the comparison, the verdict."""
    a, b = (int(x) for x in question.split("+"))
    s = str(a + b)
    same = candidate.strip() == s
    return f"{scratchpad(a, b)}{s}{'=' if same else '!='}{candidate} \\boxed{{{'Yes' if same else 'No'}}}"


def warmup_corpus(
    spec: WarmupSpec, *, exclude: set[str] = frozenset(), prefix: str = "\n"
) -> list[str]:
    """``spec.n_docs`` documents ``prompt + response``. Prompts are one line ending in ``\\n``
    (the SFT marker); ``exclude`` keeps held-out questions out of the corpus."""
    rng = random.Random(spec.seed)
    task = ArithmeticTask(digits=spec.digits, seed=spec.seed + 17)
    problems = task.problems(spec.n_docs, exclude=exclude)
    docs = []
    for p in problems:
        q = p["question"]
        if rng.random() >= spec.verify_fraction:
            docs.append(generation_prompt(q) + ArithmeticTask.solution(q))
            continue
        a, b = (int(x) for x in q.split("+"))
        correct = rng.random() < 0.5
        cand = str(a + b) if correct else str(wrong_answer(a, b, rng))
        if rng.random() < spec.recompute_share:
            resp = recompute_response(q, cand)
        else:
            resp = "\\boxed{" + ("Yes" if rng.random() < spec.yes_bias else "No") + "}"
        docs.append(verification_prompt(q, cand) + resp)
    return docs
