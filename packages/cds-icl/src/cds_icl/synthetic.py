"""A local synthetic chain-of-thought math set and the tiny model trained on it.

Six problem types (linear equations, remainders, shopping, give-away, products of sums, remainders
of sums), each with a 2-3 line step-by-step solution ending in ``\\boxed{ N }`` and a terse
rewrite in another style (for the understandability check). Text is word-level (numbers are
single tokens), so a demonstration is 25-40 tokens and 16 demonstrations fit in 768 positions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

N_TYPES = 6
MAX_NUM = 400
POOL_SIZE = 256
TEST_SIZE = 200
DATA_SEED = 0
INSTRUCTION_SYNTH = "Solve the problem . Put the final answer in \\boxed{} ."


def _problem(kind: int, rng: np.random.Generator) -> dict[str, Any]:
    r = lambda lo, hi: int(rng.integers(lo, hi + 1))  # noqa: E731
    if kind == 0:
        a, x = r(2, 9), r(1, 20)
        b = r(1, 40)
        c = a * x + b
        p = f"solve {a} * x + {b} = {c} for x ."
        s = [f"subtract {b} : {a} * x = {c - b} .", f"divide by {a} : x = {x} ."]
        ans = x
    elif kind == 1:
        m, q = r(3, 9), r(2, 30)
        rem = r(0, m - 1)
        a = m * q + rem
        p = f"what is {a} mod {m} ?"
        s = [f"{a} = {m} * {q} + {rem} .", f"the remainder is {rem} ."]
        ans = rem
    elif kind == 2:
        a, b, c = r(2, 9), r(2, 9), r(1, 30)
        p = f"tom buys {a} packs of {b} pens and {c} more pens . how many pens ?"
        s = [f"{a} * {b} = {a * b} pens in packs .", f"{a * b} + {c} = {a * b + c} pens ."]
        ans = a * b + c
    elif kind == 3:
        a, b = r(10, 60), r(1, 40)
        c = r(1, a + b)
        p = f"ann has {a} apples , gets {b} more and gives {c} away . how many apples ?"
        s = [f"{a} + {b} = {a + b} apples .", f"{a + b} - {c} = {a + b - c} apples left ."]
        ans = a + b - c
    elif kind == 4:
        a, b, c = r(1, 20), r(1, 20), r(2, 9)
        p = f"compute ( {a} + {b} ) * {c} ."
        s = [f"first {a} + {b} = {a + b} .", f"then {a + b} * {c} = {(a + b) * c} ."]
        ans = (a + b) * c
    else:
        a, b, m = r(5, 90), r(5, 90), r(3, 9)
        t = a + b
        p = f"what is ( {a} + {b} ) mod {m} ?"
        s = [
            f"first {a} + {b} = {t} .",
            f"{t} = {m} * {t // m} + {t % m} .",
            f"the remainder is {t % m} .",
        ]
        ans = t % m
    solution = "\n".join([*s, f"the answer is \\boxed{{ {ans} }}"])
    terse = f"result {ans} therefore \\boxed{{ {ans} }}"
    return {"problem": p, "solution": solution, "terse": terse, "answer": str(ans), "type": kind}


def make_items(n: int, seed: int = DATA_SEED) -> list[dict[str, Any]]:
    """``n`` seeded items ``{idx, problem, solution, terse, answer, type}`` (types cycle)."""
    rng = np.random.default_rng(seed)
    kinds = rng.integers(0, N_TYPES, size=n)
    return [{"idx": i, **_problem(int(k), rng)} for i, k in enumerate(kinds)]


def synthetic_split() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The fixed (pool = 256 items, test = 200 items) split of the synthetic set."""
    pool = make_items(POOL_SIZE, seed=DATA_SEED)
    test = make_items(TEST_SIZE, seed=DATA_SEED + 1)
    for i, t in enumerate(test):
        t["idx"] = i
    return pool, test


def demo_text(problem: str, solution: str) -> str:
    """One demonstration in the prompt layout (see :mod:`cds_icl.prompts`)."""
    return f"### Problem:\n{problem}\n\n### Solution:\n{solution}"


def training_docs(n_docs: int, seed: int = 1000) -> list[str]:
    """Pre-training documents: the instruction, then 0-5 solved demos, then a solved query, so
    the model reads both zero-shot and few-shot prompts of the evaluation layout."""
    rng = np.random.default_rng(seed)
    items = make_items(n_docs * 4, seed=seed)
    docs, pos = [], 0
    for _ in range(n_docs):
        m = int(rng.integers(1, 5))
        chunk = items[pos : pos + m]
        pos += m
        block = "\n\n".join(demo_text(it["problem"], it["solution"]) for it in chunk)
        docs.append(f"{INSTRUCTION_SYNTH}\n\n{block}")
    return docs


def vocabulary() -> list[str]:
    """Every word the synthetic texts, prompts and terse rewrites use (word tokenizer symbols)."""
    words = {str(i) for i in range(MAX_NUM)}
    for it in make_items(600, seed=7):
        words.update((it["problem"] + " " + it["solution"] + " " + it["terse"]).split())
    words.update(INSTRUCTION_SYNTH.split())
    words.update(["###", "Problem:", "Solution:", "\\boxed{"])
    return sorted(words)
