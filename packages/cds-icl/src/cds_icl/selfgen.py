"""Self-generated demonstration pools (the paper's principle (i), "reinforce" pools): the target
model solves each pool problem zero-shot and its own chain of thought replaces the reference
solution.

Per problem, up to ``max_attempts`` sampled responses (temperature 1.0) are drawn one round at a
time; the first acceptable one is kept: it has a ``\\boxed{}`` answer, ended before the token cap
(cap + 40 tokens of slack) and, for ``correctans``/``wrongans``, is right/wrong. Without one,
``firstans`` keeps the shortest boxed (else shortest) attempt; the other variants drop the
problem. Text before a ``</think>`` is stripped.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from cds_icl.errors import CDSInputError, unknown_choice
from cds_icl.pool import Demo, DemoPool
from cds_icl.prompts import POOL_INSTRUCTION, query_text, wrap_chat

log = logging.getLogger(__name__)
VARIANTS = ("firstans", "correctans", "wrongans")
SLACK_TOKENS = 40


def _strip_think(text: str) -> str:
    return text.split("</think>")[-1].strip()


def generate_self_pool(
    model_or_id: Any,
    problems: Sequence[dict[str, Any]],
    variant: str = "firstans",
    max_attempts: int = 13,
    temperature: float = 1.0,
    max_new_tokens: int = 4096,
    backend: str = "hf",
    tokenizer: Any = None,
    task: str = "math",
    instruction: str = POOL_INSTRUCTION,
    chat: bool = False,
    seed: int = 0,
    batch_size: int = 8,
    stop: Sequence[str] = (),
) -> DemoPool:
    """A :class:`DemoPool` of the target model's own solutions to ``problems`` (rows with
    ``problem`` and ``gold``, a gold answer or reference solution; optional ``idx``)."""
    from cds_icl.grading import grade, prediction
    from cds_icl.runner import _backend, _load, cut
    from llmcore.generation import SamplingParams

    if variant not in VARIANTS:
        raise unknown_choice("pool variant", variant, VARIANTS)
    if max_attempts < 1:
        raise CDSInputError(f"max_attempts must be >= 1, got {max_attempts}")
    if not problems:
        raise CDSInputError("no problems to generate a pool from")
    model, tok = _load(model_or_id, tokenizer, backend)
    gen = _backend(backend, model, tok, batch_size, False, False)
    prompts = []
    for p in problems:
        text = (
            f"{instruction}\n\n{query_text(p['problem'], cue='')}"
            if instruction
            else query_text(p["problem"], cue="")
        )
        prompts.append(wrap_chat(tok, text) if chat else text)
    attempts: list[list[dict[str, Any]]] = [[] for _ in problems]
    chosen: dict[int, dict[str, Any]] = {}
    for a in range(max_attempts):
        todo = [i for i in range(len(problems)) if i not in chosen]
        if not todo:
            break
        params = SamplingParams(temperature=temperature, max_new_tokens=max_new_tokens + SLACK_TOKENS,
                                seed=seed * 1000 + a)  # fmt: skip
        outs = gen.generate([prompts[i] for i in todo], params)
        for i, o in zip(todo, outs, strict=True):
            c = o[0]
            resp = _strip_think(cut(c.text, stop))
            pred = prediction(task, resp)
            boxed = pred is not None
            label = bool(boxed and grade(task, resp, problems[i]["gold"]))
            att = {"response": resp, "complete_response": c.text, "pred": pred, "label": label,
                   "boxed": boxed, "ntok": len(c.token_ids),
                   "truncated": c.finish_reason == "length"}  # fmt: skip
            attempts[i].append(att)
            ok = boxed and not att["truncated"]
            if variant == "correctans":
                ok = ok and label
            elif variant == "wrongans":
                ok = ok and not label
            if ok:
                chosen[i] = att
    demos, dropped = [], 0
    for i, p in enumerate(problems):
        att = chosen.get(i)
        if att is None and variant == "firstans":
            boxed = [x for x in attempts[i] if x["boxed"]]
            att = min(boxed or attempts[i], key=lambda x: x["ntok"])
        if att is None or not att["response"]:
            dropped += 1
            continue
        meta = {"idx": p.get("idx", i), "source": "self", "correct": att["label"],
                "label": att["label"], "complete_response": att["complete_response"],
                "extracted_response": att["pred"]}  # fmt: skip
        demos.append(Demo(p["problem"], att["response"], att["pred"], meta))
    if dropped:
        log.warning(
            "self pool (%s): %d problem(s) without an acceptable response", variant, dropped
        )
    if not demos:
        raise CDSInputError(f"the {variant} pool is empty: no problem got an acceptable response")
    return DemoPool(demos)
