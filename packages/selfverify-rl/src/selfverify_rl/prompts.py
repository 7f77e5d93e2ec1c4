"""Prompt formats for the two tasks (generation and verification), plain or chat style.

Generation: the problem plus the usual "reason step by step, box the answer" instruction.
Verification (the paper's answer-judging format): a teacher checks a student's answer to the
problem and ends with ``\\boxed{Yes}`` or ``\\boxed{No}``. The plain style is a compact one-line
version for byte-level tiny models; the chat style renders the full wording through the
tokenizer's chat template.
"""

from __future__ import annotations

from typing import Any, Literal

from selfverify_rl.errors import SelfVerifyConfigError

__all__ = [
    "GEN_INSTRUCTION",
    "Style",
    "extract_question",
    "generation_prompt",
    "verification_prompt",
]

Style = Literal["plain", "chat"]

GEN_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
VERIFY_CHAT = (
    "You are a teacher checking a student's answer to a problem. Analyse whether the answer is "
    "correct, then give your verdict on the last line as \\boxed{{Yes}} if it is correct or "
    "\\boxed{{No}} if it is not.\n\nQuestion: {question}\n\nStudent's Answer: {candidate}\n\n"
    "Please reason step by step, and put your final verdict within \\boxed{{}}."
)
PLAIN_GEN_PREFIX, PLAIN_GEN_SUFFIX = "Solve ", ". Box the answer.\n"
PLAIN_VER_PREFIX, PLAIN_VER_MID, PLAIN_VER_SUFFIX = "Check ", " answer ", ". Box Yes or No.\n"


def _check_style(style: str) -> None:
    if style not in ("plain", "chat"):
        raise SelfVerifyConfigError(f"style={style!r}: use 'plain' or 'chat'")


def _render_chat(content: str, tokenizer: Any) -> str:
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        raise SelfVerifyConfigError(
            "style='chat' needs a tokenizer with a chat template; this tokenizer has none "
            "(use style='plain' for base models and tiny byte-level models)"
        )
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True
    )


def generation_prompt(question: str, style: Style = "plain", tokenizer: Any = None) -> str:
    """The generation prompt for ``question`` (chat style needs ``tokenizer``)."""
    _check_style(style)
    if style == "plain":
        return f"{PLAIN_GEN_PREFIX}{question}{PLAIN_GEN_SUFFIX}"
    return _render_chat(f"{question}\n{GEN_INSTRUCTION}", tokenizer)


def verification_prompt(
    question: str, candidate: str, style: Style = "plain", tokenizer: Any = None
) -> str:
    """The verification prompt: ``question`` (already stripped of wrappers) and the student's
    ``candidate`` (an extracted answer in ``judge_answer`` mode, a full response in
    ``judge_response`` mode)."""
    _check_style(style)
    if style == "plain":
        return f"{PLAIN_VER_PREFIX}{question}{PLAIN_VER_MID}{candidate}{PLAIN_VER_SUFFIX}"
    return _render_chat(VERIFY_CHAT.format(question=question, candidate=candidate), tokenizer)


def extract_question(prompt_text: str, tokenizer: Any = None) -> str:
    """Recover the bare problem from a generation prompt: strip the chat wrapper (when
    ``tokenizer`` has a template and the text matches it) and the boxed-answer instruction."""
    text = prompt_text
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        sentinel = "\u2063SV\u2063"
        rendered = tokenizer.apply_chat_template(
            [{"role": "user", "content": sentinel}], tokenize=False, add_generation_prompt=True
        )
        pre, _, post = rendered.partition(sentinel)
        if pre and text.startswith(pre) and text.endswith(post):
            text = text[len(pre) : len(text) - len(post)]
    for suffix in ("\n" + GEN_INSTRUCTION, GEN_INSTRUCTION):
        if text.endswith(suffix):
            return text[: -len(suffix)].strip()
    if text.startswith(PLAIN_GEN_PREFIX) and text.endswith(PLAIN_GEN_SUFFIX):
        return text[len(PLAIN_GEN_PREFIX) : -len(PLAIN_GEN_SUFFIX)]
    return text.strip()
