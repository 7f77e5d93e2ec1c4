"""Training/test examples: prompt-completion rows, conversational rows, tuples, datasets."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from excess_dl.errors import EDLInputError


@dataclass(frozen=True)
class Example:
    """One example z_i as the (context, completion) string pairs whose completion tokens are coded.

    A prompt-completion row is one pair; a conversational row gives one pair per assistant turn
    (context = the chat template rendered up to that turn's generation prompt)."""

    pairs: tuple[tuple[str, str], ...]
    row: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def key(self) -> tuple[tuple[str, str], ...]:
        return self.pairs


def _is_dataset(obj: Any) -> bool:
    return type(obj).__module__.startswith("datasets.")


def as_rows(data: Any) -> list[Any]:
    """A list of rows from a list, a JSONL path or a ``datasets.Dataset``."""
    if isinstance(data, str | Path):
        from llmcore.data import read_jsonl

        return list(read_jsonl(data))
    if _is_dataset(data):
        from llmcore.data import from_dataset

        return list(from_dataset(data))
    return list(data)


def _chat_pairs(
    messages: Sequence[Mapping[str, Any]], tokenizer: Any, i: int
) -> list[tuple[str, str]]:
    if tokenizer is None or getattr(tokenizer, "chat_template", None) is None:
        raise EDLInputError(
            f"example {i} is conversational ('messages') but the tokenizer has no chat template; "
            "give the tokenizer a chat_template or pass prompt/completion rows"
        )
    pairs = []
    for k, msg in enumerate(messages):
        if msg.get("role") != "assistant":
            continue
        ctx = tokenizer.apply_chat_template(
            list(messages[:k]), tokenize=False, add_generation_prompt=True
        )
        full = tokenizer.apply_chat_template(list(messages[: k + 1]), tokenize=False)
        if not full.startswith(ctx):
            raise EDLInputError(
                f"example {i}: the chat template does not render turn {k} as a continuation of "
                "its generation prompt; pass prompt/completion rows instead"
            )
        pairs.append((ctx, full[len(ctx) :]))
    if not pairs:
        raise EDLInputError(f"example {i} has no assistant turn to code (model turns only)")
    return pairs


def normalize_examples(data: Any, tokenizer: Any = None, *, name: str = "train") -> list[Example]:
    """Rows -> :class:`Example` list. Accepts ``{"prompt", "completion"}`` and ``{"messages"}``
    dicts, ``(prompt, completion)`` tuples, a JSONL path or a ``datasets.Dataset``."""
    rows = as_rows(data)
    if not rows:
        raise EDLInputError(f"the {name} set is empty: EDL needs at least one example")
    out = []
    for i, r in enumerate(rows):
        if isinstance(r, Example):
            out.append(r)
        elif isinstance(r, tuple | list) and len(r) == 2 and all(isinstance(s, str) for s in r):
            out.append(Example(((r[0], r[1]),), {"prompt": r[0], "completion": r[1]}))
        elif isinstance(r, Mapping) and "messages" in r:
            out.append(Example(tuple(_chat_pairs(r["messages"], tokenizer, i)), dict(r)))
        elif isinstance(r, Mapping) and "completion" in r:
            p, c = r.get("prompt", ""), r["completion"]
            if not isinstance(p, str) or not isinstance(c, str):
                raise EDLInputError(f"{name} example {i}: prompt and completion must be strings")
            out.append(Example(((p, c),), dict(r)))
        elif isinstance(r, Mapping) and "text" in r:
            raise EDLInputError(
                f"{name} example {i} has only 'text': EDL codes completion tokens, so each row "
                "needs a prompt/completion split ({'prompt', 'completion'} or 'messages')"
            )
        else:
            raise EDLInputError(
                f"{name} example {i} has no completion: expected {{'prompt', 'completion'}}, "
                f"{{'messages': [...]}} or a (prompt, completion) tuple, got {r!r:.120}"
            )
        if any(c == "" for _, c in out[-1].pairs):
            raise EDLInputError(f"{name} example {i} has an empty completion; drop it")
    return out


def check_overlap(train: Sequence[Example], test: Sequence[Example], allow: bool) -> float:
    """Fraction of test examples that also occur (exact prompt and completion) in train; more
    than 1 % is leakage (EDL needs a held-out estimate of L(theta_n))."""
    keys = {e.key for e in train}
    frac = sum(e.key in keys for e in test) / max(len(test), 1)
    if frac > 0.01 and not allow:
        raise EDLInputError(
            f"{frac:.1%} of the test examples also occur in the training set (> 1 %): the test "
            "loss would not be held out. Deduplicate, or pass allow_overlap=True for a "
            "finite-support task whose test set is the whole population"
        )
    return frac


def shuffled_labels(examples: Sequence[Example], seed: int) -> list[Example]:
    """The format control: completions permuted across examples (label marginal kept)."""
    import random

    comps = [e.pairs for e in examples]
    rng = random.Random(seed)
    perm = list(range(len(comps)))
    rng.shuffle(perm)
    out = []
    for e, j in zip(examples, perm, strict=True):
        ctx = [p for p, _ in e.pairs]
        new = [c for _, c in comps[j]]
        if len(ctx) != len(new):
            new = [c for _, c in e.pairs]
        out.append(Example(tuple(zip(ctx, new, strict=True)), e.row))
    return out


def iter_pairs(examples: Iterable[Example]) -> list[tuple[str, str]]:
    return [p for e in examples for p in e.pairs]
