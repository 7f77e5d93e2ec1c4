"""Answer grading: MATH (Minerva / lm-eval style: last box, normalisation, equivalence) and
GSM8K (last number against the text after ``####``)."""

from __future__ import annotations

from llmcore.metrics import extract_number, last_boxed, math_equivalent, numeric_match


def extract_math(response: str) -> str | None:
    """The prediction of a MATH response: the content of its last ``\\boxed{}``/``\\fbox{}``."""
    text = response.split("</think>")[-1]
    return last_boxed(text)


def grade_math(response: str, gold: str, timeout: float = 5.0) -> bool:
    """Whether the last box of ``response`` equals ``gold`` (an answer or a reference
    solution, whose last box is used). No box is wrong. Symbolic checks run in llmcore's
    sandboxed worker with ``timeout`` seconds; model text is never evaluated."""
    pred = extract_math(response)
    if pred is None:
        return False
    return bool(math_equivalent(pred, gold, timeout=timeout))


def gsm8k_gold(answer: str) -> str:
    """The gold of a GSM8K answer field: the text after ``####`` (the whole text if none)."""
    return answer.split("####")[-1].strip().replace(",", "")


def grade_gsm8k(response: str, gold: str) -> bool:
    """Whether the last number in ``response`` equals the GSM8K gold (after ``####``)."""
    pred = extract_number(response.split("</think>")[-1])
    ref = extract_number(gsm8k_gold(gold))
    if pred is None or ref is None:
        return False
    return bool(numeric_match(pred, ref))


def grade(task: str, response: str, gold: str) -> bool:
    """Dispatch on the task family (``gsm8k`` or anything MATH-like)."""
    return grade_gsm8k(response, gold) if task.startswith("gsm8k") else grade_math(response, gold)


def prediction(task: str, response: str) -> str | None:
    """The extracted prediction as a string (for results files)."""
    if task.startswith("gsm8k"):
        v = extract_number(response.split("</think>")[-1])
        return None if v is None else repr(v)
    return extract_math(response)
