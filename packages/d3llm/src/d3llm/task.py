"""The synthetic tasks of the CPU fixtures: "copy + running parity" (the calibrated one) and
"sort" (sorted digits).

Parity: prompt ``"<s>8,8,4,5="`` (``n`` random digits), answer each digit followed by the parity
of the odd digits so far, ``"80804051"``, then ``</s>`` padding to ``gen_length``. The separators
put prompt digit ``i`` and answer digit ``i`` at a constant distance, and parity bit ``i`` sits
next to digit ``i`` and bit ``i - 1``, so every rule is local in relative position. The copied
digits are independent of each other, while parity bit ``i`` depends on every digit up to
``i``: given bit ``i - 1`` it is a local rule, without it the model must compute the parity of a
whole prefix. A model in training becomes accurate one token per forward before it is confident
about all bits at once, which leaves room for parallel decoding and distillation.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

from d3llm.errors import D3LLMConfigError


@dataclass(frozen=True)
class DigitTask:
    """``n`` random digits, prompt ``"d,d,...,d="``, a deterministic answer, ``</s>`` padding to
    ``gen_length`` generated positions. Subclasses define :meth:`answer` and ``answer_length``."""

    n_digits: int = 6
    """Digits in the prompt."""
    gen_length: int = 16
    """Generated positions (answer + ``</s>`` padding); at least the answer length + 1."""
    name: ClassVar[str] = "digits"

    def __post_init__(self) -> None:
        if self.n_digits < 1:
            raise D3LLMConfigError(f"n_digits must be >= 1, got {self.n_digits}")
        if self.gen_length < self.answer_length + 1:
            raise D3LLMConfigError(
                f"gen_length={self.gen_length} is too short for a {self.answer_length}-token "
                "answer and its </s>"
            )

    @property
    def answer_length(self) -> int:
        return self.n_digits

    def prompt(self, x: str) -> str:
        return ",".join(x) + "="

    def answer(self, x: str) -> str:
        raise NotImplementedError

    def document(self, x: str) -> str:
        """Prompt, answer and ``</s>`` padding (the zoo's encoder adds ``<s>`` and one more
        ``</s>``), so every document spans exactly ``gen_length`` answer positions."""
        pad = self.gen_length - self.answer_length - 1
        return self.prompt(x) + self.answer(x) + "</s>" * pad

    def inputs(self, n: int, seed: int) -> list[str]:
        rng = random.Random(seed)
        return ["".join(rng.choice("0123456789") for _ in range(self.n_digits)) for _ in range(n)]

    def eval_inputs(self, n: int = 128, seed: int = 12345, exclude: set[str] | None = None):
        """Held-out inputs (a separate seed, minus any in ``exclude``)."""
        rng = random.Random(seed)
        out: list[str] = []
        while len(out) < n:
            x = "".join(rng.choice("0123456789") for _ in range(self.n_digits))
            if not exclude or x not in exclude:
                out.append(x)
        return out

    def records(self, inputs: list[str]) -> list[dict]:
        """``idx``/``question``/``gt_answer`` records (trajectory extraction, lm-eval data)."""
        return [
            {"idx": i, "question": self.prompt(x), "gt_answer": self.answer(x)}
            for i, x in enumerate(inputs)
        ]


@dataclass(frozen=True)
class ParityTask(DigitTask):
    """``n`` digits -> (digit, running parity) pairs: ``"8,8,4,5="`` -> ``"80804051"``."""

    name: ClassVar[str] = "parity"

    @property
    def answer_length(self) -> int:
        return 2 * self.n_digits

    def answer(self, x: str) -> str:
        out, parity = [], 0
        for c in x:
            parity ^= int(c) % 2
            out.append(f"{c}{parity}")
        return "".join(out)


@dataclass(frozen=True)
class SortTask(DigitTask):
    """``n`` digits -> the digits sorted: ``"8,8,4,5="`` -> ``"4588"``. Every answer position
    is determined by the digit counts alone, so a trained model commits the whole answer in one
    forward (no room for distillation; kept as the simplest parallel task)."""

    name: ClassVar[str] = "sort"

    def answer(self, x: str) -> str:
        return "".join(sorted(x))


TASKS: dict[str, type[DigitTask]] = {"parity": ParityTask, "sort": SortTask}
"""The tasks ``d3llm make-tiny --task`` knows."""


def make_task(name: str, n_digits: int, gen_length: int) -> DigitTask:
    """The task called ``name`` (a key of :data:`TASKS`)."""
    if name not in TASKS:
        raise D3LLMConfigError(f"unknown task {name!r}; choose one of {sorted(TASKS)}")
    return TASKS[name](n_digits, gen_length)
