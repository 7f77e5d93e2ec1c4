"""Rewards for generation and verification rows, in trl's reward-function signature.

Both functions take ``(prompts, completions, **columns)`` and return one value per completion:
a float for their own task's rows and ``None`` for the other task's rows (trl then ignores them).
The generation reward is the paper's binary DAPO score (last ``\\boxed{}`` of the response tail,
normalised string match) with the optional DAPO overlong penalty; the verification reward is the
paper's ``1[verdict == label] * min(pass_rate, 0.5)``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

from llmcore.metrics import last_boxed, normalize_math_answer

__all__ = [
    "extract_boxed",
    "generation_reward",
    "make_reward_funcs",
    "normalize_answer",
    "overlong_penalty",
    "parse_verdict",
    "score_generation",
    "verification_reward",
]

SCORER_TAIL = 200
_TEXT = re.compile(r"\\(?:text|textbf|mathrm)\{([^{}]*)\}")


def _text(completion: Any) -> str:
    """A completion as text (trl passes strings, or message lists for chat datasets)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return ""


def extract_boxed(text: str, tail_chars: int = 300) -> str | None:
    """Content of the last ``\\boxed{}`` in the response tail (Sec. 2.1 of the paper's scorer:
    the last ``tail_chars`` characters, then the last 200 of those), or ``None``."""
    if not isinstance(text, str):
        return None
    tail = text[-tail_chars:] if tail_chars > 0 else text
    return last_boxed(tail[-SCORER_TAIL:])


@functools.lru_cache(maxsize=65536)
def normalize_answer(s: str) -> str:
    """Normalise a final answer for string comparison: keep the text after the last ``=``, unwrap
    ``\\boxed``/``\\text``, drop ``$``, units and thousands commas in integers, and fix
    ``\\frac``/``\\sqrt`` shorthand (``\\frac12`` -> ``\\frac{1}{2}``)."""
    if s is None:
        return ""
    s = str(s)
    if s.isdigit():  # fast path: a plain non-negative integer is already normal
        return s
    inner = last_boxed(s)
    if inner is not None:
        s = inner
    s = s.split("=")[-1]
    s = _TEXT.sub(r"\1", s)
    s = normalize_math_answer(s).strip()
    if re.fullmatch(r"-?\d{1,3}(,\d{3})+", s):
        s = s.replace(",", "")
    return s


def overlong_penalty(length: int, max_length: int, buffer: int, factor: float = 1.0) -> float:
    """DAPO's soft overlong penalty: ``min(-(length - (max_length - buffer)) / buffer * factor, 0)``."""
    if buffer <= 0:
        return 0.0
    return min(-(length - (max_length - buffer)) / buffer * factor, 0.0)


def score_generation(
    completion: Any, answer: str, *, use_math_verify: bool = False
) -> tuple[float, bool, str | None]:
    """``(r_gen, valid, extracted)`` for one response: ``valid`` iff a boxed answer was found;
    ``r_gen`` 1.0 iff it matches ``answer`` after normalisation (or, with ``use_math_verify``,
    :func:`llmcore.metrics.math_equivalent`)."""
    try:
        box = extract_boxed(_text(completion))
        if box is None:
            return 0.0, False, None
        pred = normalize_answer(box)
        ok = pred == normalize_answer(answer)
        if not ok and use_math_verify:
            from llmcore.metrics import math_equivalent

            ok = bool(math_equivalent(box, str(answer)))
        return float(ok), True, pred
    except Exception:
        return 0.0, False, None


def parse_verdict(text: Any) -> Literal["Yes", "No"] | None:
    """The verdict of a verification response: the last ``\\boxed{}`` of its tail, case and
    space insensitive (``\\boxed{ yes }`` -> ``"Yes"``); anything else is ``None``."""
    box = extract_boxed(_text(text))
    if box is None:
        return None
    v = _TEXT.sub(r"\1", box).strip().strip(".").strip().lower()
    return {"yes": "Yes", "no": "No"}.get(v)


def _column(kw: dict[str, Any], name: str, n: int) -> list[Any]:
    v = kw.get(name)
    if isinstance(v, list | tuple) and len(v) == n:
        return list(v)
    return [v] * n


def generation_reward(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    *,
    max_completion_length: int | None = None,
    overlong_buffer: int = 0,
    overlong_factor: float = 1.0,
    use_math_verify: bool = False,
    **kw: Any,
) -> list[float | None]:
    """Binary generation reward on rows with ``task == "gen"`` (``None`` elsewhere), plus the
    overlong penalty when ``overlong_buffer > 0`` (needs trl's ``completion_ids`` and
    ``max_completion_length``). Never raises: a malformed completion scores 0.0."""
    n = len(completions)
    tasks, answers = _column(kw, "task", n), _column(kw, "answer", n)
    ids = _column(kw, "completion_ids", n)
    out: list[float | None] = []
    for c, t, a, cid in zip(completions, tasks, answers, ids, strict=True):
        if t != "gen":
            out.append(None)
            continue
        r = score_generation(c, a, use_math_verify=use_math_verify)[0] if a is not None else 0.0
        if overlong_buffer > 0 and max_completion_length:
            length = len(cid) if cid is not None else len(_text(c))
            r += overlong_penalty(length, max_completion_length, overlong_buffer, overlong_factor)
        out.append(r)
    return out


def verification_reward(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    *,
    pass_rate_weighting: bool = True,
    **kw: Any,
) -> list[float | None]:
    """Verification reward on rows with ``task == "verify"`` (``None`` elsewhere):
    ``1[parse_verdict(completion) == label]``, times ``min(pass_rate, 0.5)`` with
    ``pass_rate_weighting``. The factor is constant within a GRPO group, so it cancels in
    group-std-normalised advantages and matters only with ``scale_rewards="none"``."""
    n = len(completions)
    tasks, labels = _column(kw, "task", n), _column(kw, "label", n)
    rates = _column(kw, "pass_rate", n)
    out: list[float | None] = []
    for c, t, lab, p in zip(completions, tasks, labels, rates, strict=True):
        if t != "verify":
            out.append(None)
            continue
        try:
            r = float(parse_verdict(c) == lab and lab is not None)
            if pass_rate_weighting:
                r *= min(float(p if p is not None else 0.0), 0.5)
        except Exception:
            r = 0.0
        out.append(r)
    return out


def make_reward_funcs(
    *,
    max_completion_length: int | None = None,
    overlong_buffer: int = 0,
    overlong_factor: float = 1.0,
    pass_rate_weighting: bool = True,
    use_math_verify: bool = False,
) -> list[Callable[..., list[float | None]]]:
    """``[gen_reward, verify_reward]`` configured and wrapped in :func:`llmcore.rl.safe_reward`
    (trl logs them as ``rewards/gen_reward`` and ``rewards/verify_reward``)."""
    from llmcore.rl import safe_reward

    def gen_reward(prompts: Any, completions: Any, **kw: Any) -> list[float | None]:
        return generation_reward(
            prompts,
            completions,
            max_completion_length=max_completion_length,
            overlong_buffer=overlong_buffer,
            overlong_factor=overlong_factor,
            use_math_verify=use_math_verify,
            **kw,
        )

    def verify_reward(prompts: Any, completions: Any, **kw: Any) -> list[float | None]:
        return verification_reward(
            prompts, completions, pass_rate_weighting=pass_rate_weighting, **kw
        )

    return [safe_reward(gen_reward), safe_reward(verify_reward)]
