"""Understandability score (an extension of principle (i); not a quantity of the paper):
``u(d) = -(1/|s|) sum_t log p(s_t | prompt(problem), s_<t)``, the mean token NLL of a demo's
solution under the target model, teacher-forced, with the problem in the prompt layout.
Lower means better aligned with how the target model itself writes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cds_icl.pool import Demo
from cds_icl.prompts import query_text


def understandability(
    model: Any,
    tokenizer: Any,
    demos: Sequence[Demo],
    instruction: str | None = None,
    batch_size: int = 8,
    style: str = "official",
) -> list[float]:
    """Mean token NLL of each demo's solution (``llmcore.metrics.completion_logprobs``)."""
    from cds_icl.prompts import INSTRUCTION
    from llmcore.metrics import completion_logprobs

    instr = INSTRUCTION if instruction is None else instruction
    pairs = []
    for d in demos:
        q = query_text(d.problem, style, cue="")
        pairs.append((f"{instr}\n\n{q}" if instr else q, "\n" + d.solution))
    means = completion_logprobs(model, tokenizer, pairs, batch_size=batch_size, reduce="mean")
    return [-float(m) for m in means]
