"""Decision block and selective feedback injection (paper Sec. 3, "frozen context").

The decision block is ``# Plan Decision`` followed by one ``## {name}`` section per report with
``Plan decision: {summary if present else raw feedback}``. It is inserted immediately before
the ``# Program Evolution History`` anchor of the frozen user prompt (appended when the anchor
is absent); an empty block leaves the prompt byte-identical. The system prompt never changes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

ANCHOR = "# Program Evolution History"
DECISION_HEADER = "# Plan Decision"

SYSTEM_PROMPT = (
    "You are an expert GPU kernel engineer. Rewrite the given kernel to be correct and fast. "
    "Consider tiling for cache/shared-memory reuse, vectorised and coalesced loads, loop "
    "transformations (interchange, unrolling, blocking) and occupancy. Keep the exact function "
    "signature. Return the complete program in one fenced code block."
)

#: Content-free planning text used as the placebo-plan control.
PLACEBO_PLAN = (
    "Consider the program as a whole and make reasonable improvements where appropriate. "
    "Keep the overall structure in mind and proceed step by step."
)


@dataclass
class Report:
    """One feedback component's contribution to the decision block."""

    name: str
    raw: str = ""
    summary: str | None = None

    def decision_text(self) -> str:
        return self.summary if self.summary else self.raw


def decision_block(reports: Sequence[Report]) -> str:
    """``# Plan Decision`` + ``## name`` / ``Plan decision: ...`` per report ('' for none)."""
    if not reports:
        return ""
    parts = [DECISION_HEADER, ""]
    for r in reports:
        parts += [f"## {r.name}", f"Plan decision: {r.decision_text()}", ""]
    return "\n".join(parts)


def inject(user_prompt: str, block: str) -> str:
    """Insert ``block`` before the evolution-history anchor (or append); '' changes nothing."""
    if not block:
        return user_prompt
    k = user_prompt.find(ANCHOR)
    if k < 0:
        sep = "" if user_prompt.endswith("\n") or not user_prompt else "\n"
        return f"{user_prompt}{sep}\n{block}\n"
    return f"{user_prompt[:k]}{block}\n{user_prompt[k:]}"


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+\-]*)[^\n]*\n(.*?)```", re.S)


def extract_code(text: str) -> str | None:
    """The first fenced code block of an LLM reply, or ``None`` when there is none."""
    m = _FENCE.search(text or "")
    if m is None:
        return None
    return m.group(2)


def user_prompt(
    code: str, metrics: dict, history: str = "", language: str = "c", task: str = ""
) -> str:
    """The user prompt of the built-in evolver (OpenEvolve's full-rewrite layout)."""
    lines = [f"- {k}: {v}" for k, v in sorted(metrics.items()) if not isinstance(v, dict | list)]
    return (
        (f"Kernel task: {task}\n\n" if task else "") + "# Current Program\n"
        f"```{language}\n{code.rstrip()}\n```\n\n"
        "# Current Metrics\n" + "\n".join(lines) + "\n\n"
        f"{ANCHOR}\n{history or '(none)'}\n\n"
        "# Task\nRewrite the program to improve its combined_score. Return the full program.\n"
    )
