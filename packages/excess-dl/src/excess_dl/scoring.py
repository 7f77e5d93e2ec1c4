"""Code lengths in bits: l(theta; x, y) = -sum_t log2 p_theta(y_t | x, y_<t), completion tokens only.

Scoring goes through :func:`llmcore.metrics.completion_logprobs` (prompt and completion tokenised
separately, BOS rule, length-sorted batches), so the coded tokens are exactly those the learners
train on (:func:`encode_examples` uses the same tokenisation).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from excess_dl.data import Example, normalize_examples
from excess_dl.errors import EDLInputError

LN2 = math.log(2.0)


@dataclass(frozen=True)
class EncodedExample:
    """Token ids of one example: one ``(context_ids, completion_ids)`` per coded pair."""

    rows: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]

    @property
    def n_tokens(self) -> int:
        return sum(len(c) for _, c in self.rows)


def _with_eos(examples: Sequence[Example], tokenizer: Any, add_eos: bool) -> list[Example]:
    if not add_eos:
        return list(examples)
    if tokenizer.eos_token is None:
        raise EDLInputError(
            "add_eos=True but the tokenizer has no eos_token; set one or pass False"
        )
    return [
        Example(tuple((p, c + tokenizer.eos_token) for p, c in e.pairs), e.row) for e in examples
    ]


def check_tokenizer(model: Any, tokenizer: Any) -> None:
    """The tokenizer must fit the model's embedding table."""
    emb = model.get_input_embeddings().num_embeddings
    if len(tokenizer) > emb:
        raise EDLInputError(
            f"tokenizer/model mismatch: the tokenizer has {len(tokenizer)} tokens but the model's "
            f"embedding table has {emb} rows; pass the tokenizer saved with this model"
        )


def encode_examples(
    examples: Sequence[Example],
    tokenizer: Any,
    *,
    add_eos: bool = False,
    add_bos: bool | None = None,
    max_length: int | None = None,
) -> list[EncodedExample]:
    """Token ids exactly as :func:`llmcore.metrics.completion_logprobs` scores them; an empty
    tokenised completion or an over-long row raises :class:`EDLInputError` with the index."""
    from llmcore.metrics import completion_token_ids

    examples = _with_eos(examples, tokenizer, add_eos)
    out = []
    for i, e in enumerate(examples):
        for _, c in e.pairs:
            if not c or not tokenizer(c, add_special_tokens=False)["input_ids"]:
                raise EDLInputError(
                    f"example {i}: completion {c!r} tokenizes to 0 tokens; drop the example"
                )
        ids = completion_token_ids(tokenizer, list(e.pairs), add_bos=add_bos)
        rows = tuple((tuple(a), tuple(b)) for a, b in ids)
        if max_length is not None:
            longest = max(len(a) + len(b) for a, b in rows)
            if longest > max_length:
                raise EDLInputError(
                    f"example {i}: prompt + completion is {longest} tokens, longer than the "
                    f"model's context ({max_length}); shorten or drop it"
                )
        out.append(EncodedExample(rows))
    return out


def code_lengths(
    model: Any,
    tokenizer: Any,
    examples: Any,
    batch_size: int = 16,
    device: str | None = None,
    *,
    add_eos: bool = False,
    add_bos: bool | None = None,
) -> list[float]:
    """Bits per example, completion tokens only (eval mode, no grad): the code length
    l(theta; x, y) of the prequential code. ``examples``: ``{"prompt", "completion"}`` or
    ``{"messages"}`` rows (assistant turns coded through the chat template), ``(prompt,
    completion)`` tuples, a JSONL path or a ``datasets.Dataset``."""
    from llmcore.metrics import completion_logprobs

    exs = _with_eos(normalize_examples(examples, tokenizer, name="input"), tokenizer, add_eos)
    if device is not None:
        model.to(device)
    pairs = [p for e in exs for p in e.pairs]
    owner = [i for i, e in enumerate(exs) for _ in e.pairs]
    ll = completion_logprobs(
        model, tokenizer, pairs, batch_size=batch_size, add_bos=add_bos, reduce="sum"
    )
    bits = [0.0] * len(exs)
    for i, v in zip(owner, ll, strict=True):
        bits[i] -= float(v) / LN2
    return bits


def vllm_code_lengths(backend: Any, examples: Sequence[Example]) -> list[float]:
    """Bits per example from a vLLM backend's prompt log-probs (``VLLMBackend.score``)."""
    pairs = [p for e in examples for p in e.pairs]
    owner = [i for i, e in enumerate(examples) for _ in e.pairs]
    scores = backend.score(pairs)
    bits = [0.0] * len(examples)
    for i, lp in zip(owner, scores, strict=True):
        bits[i] -= sum(lp) / LN2
    return bits


def greedy_exact_match(
    model: Any, encoded: Sequence[EncodedExample], *, batch_size: int = 64
) -> list[bool]:
    """Greedy decoding of every completion (as many tokens as the reference); an example is
    correct when every pair's greedy tokens equal its completion tokens."""
    import torch

    dev = next(model.parameters()).device
    flat = [(i, ctx, comp) for i, e in enumerate(encoded) for ctx, comp in e.rows]
    ok = [True] * len(encoded)
    groups: dict[int, list[tuple[int, tuple[int, ...], tuple[int, ...]]]] = {}
    for item in flat:
        groups.setdefault(len(item[1]), []).append(item)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for items in groups.values():  # equal context length: no padding needed
            for s in range(0, len(items), batch_size):
                chunk = items[s : s + batch_size]
                ids = torch.tensor([c for _, c, _ in chunk], device=dev)
                steps = max(len(y) for _, _, y in chunk)
                for _ in range(steps):
                    nxt = model(input_ids=ids).logits[:, -1].argmax(-1, keepdim=True)
                    ids = torch.cat([ids, nxt], dim=1)
                gen = ids[:, len(chunk[0][1]) :].tolist()
                for (i, _, y), g in zip(chunk, gen, strict=True):
                    if tuple(g[: len(y)]) != tuple(y):
                        ok[i] = False
    model.train(was_training)
    return ok
