"""Sampling n responses per forget query through llmcore backends."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from unlearn_leakk.config import DecodingConfig
from unlearn_leakk.data import LeakItem, validate_items
from unlearn_leakk.errors import LeakConfigError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)
SYSTEM_PROMPT = "You are a helpful assistant."
#: Llama-3 template variable of the official configs.
DATE_STRING = "10 Apr 2025"


def mcq_prompt(item: LeakItem) -> str:
    """Question plus lettered choices, answer requested as one letter (WMDP, reconstructed)."""
    assert item.choices is not None
    lines = [item.question.strip()]
    lines += [f"{chr(65 + i)}. {c}" for i, c in enumerate(item.choices)]
    lines.append("Answer:")
    return "\n".join(lines)


def _adds_bos(tokenizer: Any) -> bool:
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        return True
    ids = tokenizer("a")["input_ids"]
    return bool(ids) and ids[0] == bos


def render_prompts(
    tokenizer: PreTrainedTokenizerBase | None,
    items: Sequence[LeakItem],
    *,
    chat_template: bool = True,
    system_prompt: str | None = SYSTEM_PROMPT,
) -> list[str]:
    """Prompt strings: the tokenizer's chat template (system + user turn, generation prompt)
    or the raw question (with the bos token prepended when the tokenizer does not add one)."""
    texts = [mcq_prompt(it) if it.choices is not None else it.question for it in items]
    if tokenizer is None:
        if chat_template:
            raise LeakConfigError("chat_template=True needs a tokenizer to render prompts")
        return texts
    if chat_template:
        if not getattr(tokenizer, "chat_template", None):
            raise LeakConfigError(
                "the tokenizer has no chat template but chat_template=True; pass "
                "chat_template=False (--no-chat-template) for a base model"
            )
        out = []
        for t in texts:
            msgs = [{"role": "user", "content": t}]
            if system_prompt:
                msgs.insert(0, {"role": "system", "content": system_prompt})
            out.append(
                tokenizer.apply_chat_template(
                    msgs, tokenize=False, add_generation_prompt=True, date_string=DATE_STRING
                )
            )
        return out
    prefix = "" if _adds_bos(tokenizer) or not tokenizer.bos_token else tokenizer.bos_token
    return [prefix + t for t in texts]


def _params(decoding: DecodingConfig, n: int, seed: int, stop: Sequence[str]):
    from llmcore.generation import SamplingParams

    return SamplingParams(
        n=n,
        temperature=float(decoding.temperature),
        top_p=1.0 if decoding.is_greedy else float(decoding.top_p),
        top_k=decoding.top_k or 0,
        max_new_tokens=decoding.max_new_tokens,
        seed=seed,
        stop=list(stop),
    )


def item_seed(decoding: DecodingConfig, index: int, chunk: int = 0) -> int:
    """Seed of item ``index``'s chunk ``chunk``: ``seed + index``, chunks offset."""
    return decoding.seed + index + chunk * 1_000_003


def sample_responses(
    model: str | Path | PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase | None,
    items: Sequence[LeakItem],
    decoding: DecodingConfig,
    backend: str | Any = "hf",
    chat_template: bool = True,
    system_prompt: str | None = SYSTEM_PROMPT,
    *,
    progress: bool = False,
    offset: int = 0,
) -> list[list[str]]:
    """``decoding.n`` responses per item (``result[i][j]``), stripped and cut at stop strings.

    ``backend="hf"``: per item, ``ceil(n / batch_size)`` ``generate`` calls with
    ``num_return_sequences`` (one prompt prefill per call), seeded with ``seed + item index``.
    ``backend="vllm"``: one engine call with ``SamplingParams(n=...)`` per item seed.
    A ready backend object (anything with ``generate(prompts, params)``) is used as is.
    ``offset`` is the index of ``items[0]`` in the full list (keeps seeds stable on resume).
    """
    from tqdm.auto import tqdm

    from llmcore.generation import get_backend

    items = validate_items(items)
    if isinstance(backend, str):
        if backend == "hf":
            if isinstance(model, str | Path) and tokenizer is None:
                from llmcore.models import load_tokenizer

                tokenizer = load_tokenizer(model)
            be = get_backend("hf", model, tokenizer=tokenizer, batch_size=1, progress=False)
            tokenizer = be.tokenizer
        elif backend == "vllm":
            if not isinstance(model, str | Path):
                raise LeakConfigError("the vllm backend needs a model id or path, not an object")
            be = get_backend("vllm", str(model))
            if tokenizer is None:
                from llmcore.models import load_tokenizer

                tokenizer = load_tokenizer(model)
        else:
            raise LeakConfigError(f"unknown backend {backend!r}; use 'hf' or 'vllm'")
    else:
        be = backend
        tokenizer = tokenizer or getattr(be, "tokenizer", None)
    prompts = render_prompts(
        tokenizer, items, chat_template=chat_template, system_prompt=system_prompt
    )
    out: list[list[str]] = []
    chunk = decoding.n if decoding.is_greedy else decoding.batch_size
    for i, (item, prompt) in enumerate(
        tqdm(list(zip(items, prompts, strict=True)), desc="sample", disable=not progress)
    ):
        stop = decoding.stop if decoding.stop is not None else item.stop
        texts: list[str] = []
        for c, start in enumerate(range(0, decoding.n, chunk)):
            m = min(chunk, decoding.n - start)
            params = _params(decoding, m, item_seed(decoding, offset + i, c), stop)
            texts += [x.text.strip() for x in be.generate([prompt], params)[0]]
        out.append(texts)
    return out
