"""The synthetic task of the CPU fixtures: "copy + running parity".

Prompt ``"<s>8,8,4,5,4,0="`` (``n`` random digits), answer each digit followed by the parity
of the odd digits so far: ``"808040514140"``, then ``</s>`` padding to ``gen_length``. The
separators put prompt digit ``i`` and answer digit ``i`` at a constant distance, and parity bit
``i`` sits next to digit ``i`` and bit ``i - 1``, so every rule is local in relative position. The copied digits are independent of each other (many can be committed in one
forward), while parity bit ``i`` depends on every digit up to ``i``: given bit ``i - 1`` it is a
local rule, without it the model must compute the parity of a whole prefix. Decoding one token
per forward is therefore easy and committing many bits at once is not, the speed/accuracy
trade-off parallel decoding and distillation act on.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from d3llm.errors import D3LLMConfigError


@dataclass(frozen=True)
class ParityTask:
    """``n`` digits -> (digit, running parity) pairs."""

    n_digits: int = 6
    """Digits in the prompt; the answer has ``2 * n_digits`` tokens."""
    gen_length: int = 16
    """Generated positions (answer + ``</s>`` padding); at least ``2 * n_digits + 1``."""

    def __post_init__(self) -> None:
        if self.n_digits < 1:
            raise D3LLMConfigError(f"n_digits must be >= 1, got {self.n_digits}")
        if self.gen_length < 2 * self.n_digits + 1:
            raise D3LLMConfigError(
                f"gen_length={self.gen_length} is too short for a {2 * self.n_digits}-token "
                "answer and its </s>"
            )

    def prompt(self, x: str) -> str:
        return ",".join(x) + "="

    def answer(self, x: str) -> str:
        out, parity = [], 0
        for c in x:
            parity ^= int(c) % 2
            out.append(f"{c}{parity}")
        return "".join(out)

    def document(self, x: str) -> str:
        """Prompt, answer and ``</s>`` padding (the zoo's encoder adds ``<s>`` and one more
        ``</s>``), so every document spans exactly ``gen_length`` answer positions."""
        pad = self.gen_length - 2 * self.n_digits - 1
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
