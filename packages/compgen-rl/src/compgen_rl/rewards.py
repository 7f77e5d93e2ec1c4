"""Outcome reward and the step-accuracy diagnostic (trl reward-function signatures).

The RL reward is binary exact match of the final answer, ``r = 1[extract_answer(c) == y]``;
step accuracy compares each ``h<l>`` line with the executor's value and is logged at weight 0
(no trace supervision).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from compgen_rl.hlsm import Program, completion_text, execute, parse_completion, parse_prompt_input

__all__ = ["exact_match_reward", "step_accuracy", "trl_reward_funcs"]


def exact_match_reward(completions: Sequence[Any], answer: Sequence[str], **kw: Any) -> list[float]:
    """1.0 when a completion's final answer equals ``answer`` (trailing whitespace ignored),
    else 0.0; a completion without an answer line scores 0.0. Never raises on odd input."""
    out = []
    for i, c in enumerate(completions):
        try:
            got = _fast_answer(c) if isinstance(c, str) else None
            if got is None:
                got = parse_completion(completion_text(c)).answer
            gold = str(answer[i]).rstrip()
            out.append(1.0 if got is not None and got.rstrip() == gold else 0.0)
        except Exception:
            out.append(0.0)
    return out


_OTHER_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def _fast_answer(text: str) -> str | None:
    """The last ``ans=`` line of a plain newline-separated completion, or ``None`` (then the
    full parser decides, e.g. for JSON answers or carriage returns)."""
    if any(c in text for c in _OTHER_BREAKS):
        return None
    i = text.rfind("\nans=")
    if i < 0:
        if not text.startswith("ans="):
            return None
        i = -1
    j = text.find("\n", i + 5)
    return (text[i + 5 :] if j < 0 else text[i + 5 : j]).rstrip()


def _gold_hidden(program: str, x: str | None) -> list[str] | None:
    if x is None:
        return None
    try:
        return execute(Program.from_json(program), x).hidden
    except Exception:
        return None


def step_accuracy(
    completions: Sequence[Any],
    program: Sequence[str],
    prompt: Sequence[str] | None = None,
    *,
    input: Sequence[str] | None = None,
    **kw: Any,
) -> list[float]:
    """Fraction of trace lines ``h<l>`` equal to the executor's ``h_l`` (missing lines count as
    wrong); the input comes from the ``input`` column or is read from the prompt."""
    out = []
    for i, c in enumerate(completions):
        try:
            x = (
                input[i]
                if input is not None
                else parse_prompt_input(str(prompt[i]) if prompt else "")
            )
            gold = _gold_hidden(program[i], x)
            if not gold:
                out.append(0.0)
                continue
            got = parse_completion(completion_text(c)).steps
            hits = sum(1 for j, g in enumerate(gold) if j < len(got) and got[j] == g)
            out.append(hits / len(gold))
        except Exception:
            out.append(0.0)
    return out


def trl_reward_funcs() -> tuple[list[Any], list[float]]:
    """``(reward_funcs, reward_weights)`` for ``trl.GRPOTrainer``: exact match (weight 1) and
    step accuracy (weight 0, logged only), each wrapped by ``llmcore.rl.safe_reward``."""
    from llmcore.rl import safe_reward

    def exact_match(prompts: Any, completions: Any, answer: Any = (), **kw: Any) -> list[float]:
        return exact_match_reward(completions, answer)

    def step_acc(prompts: Any, completions: Any, program: Any = (), **kw: Any) -> list[float]:
        return step_accuracy(completions, program, prompts, input=kw.get("input"))

    return [safe_reward(exact_match), safe_reward(step_acc)], [1.0, 0.0]
