"""Prompt layout of the paper's MATH runner (Sec. 2.3 of our docs): one fixed demo block.

``official``: an instruction, a blank line, the demos (``### Problem:`` / ``### Solution:``)
joined by blank lines, a blank line, then the query's ``### Problem:`` and ``### Solution:``
followed by a short step-by-step cue. ``minerva``: ``Problem:`` / ``Solution:`` headers.
Real models get it as one user turn of their chat template (``wrap_chat``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cds_icl.errors import unknown_choice
from cds_icl.pool import Demo

INSTRUCTION = "Complete the following request and put your final answer within \\boxed{}."
CUE = " Let's think step by step."
POOL_INSTRUCTION = (
    "Answer the problem below. Keep the explanation short and put the final answer "
    "within \\boxed{}."
)
STYLES = ("official", "minerva")
_HEAD = {
    "official": ("### Problem:\n", "\n\n### Solution:"),
    "minerva": ("Problem:\n", "\n\nSolution:"),
}


def query_text(problem: str, style: str = "official", cue: str = CUE) -> str:
    """The query part: problem header, problem, solution header and the cue."""
    if style not in STYLES:
        raise unknown_choice("prompt style", style, STYLES)
    a, b = _HEAD[style]
    return f"{a}{problem}{b}{cue}"


def demo_block(demos: Sequence[Demo], style: str = "official") -> str:
    """Demos in order, each ``header problem / header\\nsolution``, joined by a blank line."""
    return "\n\n".join(query_text(d.problem, style, cue="") + "\n" + d.solution for d in demos)


def build_prompt(
    demos: Sequence[Demo],
    problem: str,
    style: str = "official",
    instruction: str = INSTRUCTION,
    cue: str = CUE,
) -> str:
    """The full plain-text prompt: instruction, demo block, query (the block is followed by a
    blank line)."""
    parts = [instruction] if instruction else []
    if demos:
        parts.append(demo_block(demos, style))
    parts.append(query_text(problem, style, cue))
    return "\n\n".join(parts)


def wrap_chat(tokenizer: Any, prompt: str, enable_thinking: bool | None = None) -> str:
    """``prompt`` as a single user turn of ``tokenizer``'s chat template with the generation
    prompt (``enable_thinking`` is passed for Qwen3-style templates when not None)."""
    kw: dict[str, Any] = {}
    if enable_thinking is not None:
        kw["enable_thinking"] = enable_thinking
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True, **kw
    )
