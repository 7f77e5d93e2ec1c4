"""Texts: the synthetic token streams of the CPU experiments, and JSONL / ``datasets`` readers.

The synthetic language (a BOS token, then ``seq_len - 1`` symbols) is built so that most heads
have nothing useful to attend to at most positions: Zipfian filler, a few buried ``key value``
pairs that are queried later, and markers whose last occurrence must be copied at the end. Every
symbol is one token of a word tokenizer over the 256 stream symbols.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sink_probe.errors import SinkProbeInputError

N_FILLER, N_KEYS, N_VALUES, N_MARKERS = 112, 64, 64, 13
FILLER = tuple(f"f{i}" for i in range(N_FILLER))
KEYS = tuple(f"k{i}" for i in range(N_KEYS))
VALUES = tuple(f"v{i}" for i in range(N_VALUES))
MARKERS = tuple(f"m{i}" for i in range(N_MARKERS))
ASK, LAST, SEP = "ASK", "LAST", "SEP"
SYMBOLS: tuple[str, ...] = (*FILLER, *KEYS, *VALUES, *MARKERS, ASK, LAST, SEP)
"""The 256 stream symbols (112 filler, 64 keys, 64 values, 13 markers, 3 query symbols)."""
assert len(SYMBOLS) == 256


@dataclass(frozen=True)
class StreamSpec:
    """The synthetic task (CPU validation data)."""

    seq_len: int = 64
    """Tokens per sequence including the BOS token at position 0."""
    n_pairs: int = 3
    """``key value`` pairs buried in the first half of each sequence."""
    n_queries: int = 2
    """``ASK key value`` recall queries in the second half."""
    n_markers: int = 4
    """Markers scattered in the filler; the sequence ends with ``LAST <last marker>``."""
    zipf: float = 1.1
    """Exponent of the Zipfian filler distribution over the 112 filler symbols."""


def stream_texts(n: int, spec: StreamSpec = StreamSpec(), seed: int = 0) -> list[str]:
    """``n`` seeded sequences of ``spec.seq_len - 1`` space-separated symbols (the BOS token is
    added by the tokenizer or the trainer)."""
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, N_FILLER + 1, dtype=np.float64)
    p = ranks**-spec.zipf
    p /= p.sum()
    L = spec.seq_len - 1
    out = []
    for _ in range(n):
        seq = [FILLER[i] for i in rng.choice(N_FILLER, size=L, p=p)]
        half = L // 2
        keys = rng.choice(N_KEYS, size=spec.n_pairs, replace=False)
        vals = rng.choice(N_VALUES, size=spec.n_pairs)
        slots = np.sort(rng.choice(np.arange(0, half - 1, 2), size=spec.n_pairs, replace=False))
        for k, v, s in zip(keys, vals, slots, strict=True):
            seq[s], seq[s + 1] = KEYS[k], VALUES[v]
        qslots = np.sort(rng.choice(np.arange(half, L - 6, 3), size=spec.n_queries, replace=False))
        for q in qslots:
            j = rng.integers(spec.n_pairs)
            seq[q], seq[q + 1], seq[q + 2] = ASK, KEYS[keys[j]], VALUES[vals[j]]
        taken = set(slots) | {s + 1 for s in slots}
        taken |= {q + d for q in qslots for d in range(3)}
        free = [i for i in range(L - 2) if i not in taken]
        mpos = np.sort(rng.choice(free, size=spec.n_markers, replace=False))
        last = None
        for m in mpos:
            last = MARKERS[rng.integers(N_MARKERS)]
            seq[m] = last
        seq[L - 2], seq[L - 1] = LAST, last
        out.append(" ".join(seq))
    return out


def read_texts(path: str | Path, *, field: str = "text", limit: int | None = None) -> list[str]:
    """Texts from a JSONL file of ``{"text": ...}`` rows (``field`` names the key)."""
    from llmcore.data import iter_jsonl

    out = []
    for i, row in enumerate(iter_jsonl(path)):
        if field not in row or not isinstance(row[field], str):
            raise SinkProbeInputError(
                f"{path}:{i + 1}: row has no string field {field!r} (keys: {sorted(row)})"
            )
        out.append(row[field])
        if limit is not None and len(out) >= limit:
            break
    return out


def dataset_texts(
    name: str,
    *,
    config: str | None = None,
    split: str = "validation",
    field: str = "text",
    limit: int = 256,
) -> list[str]:
    """Non-empty texts of a ``datasets`` dataset (needs the ``datasets`` extra)."""
    try:
        import datasets
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise SinkProbeInputError(
            "reading a hub dataset needs the datasets extra: pip install 'sink-probe[datasets]'"
        ) from exc
    ds = datasets.load_dataset(name, config, split=split)
    texts: list[str] = []
    for row in ds:
        t = row.get(field)
        if isinstance(t, str) and t.strip():
            texts.append(t)
            if len(texts) >= limit:
                break
    return texts


def non_empty(texts: Iterable[str]) -> Sequence[str]:
    """``texts`` as a list, rejecting an empty input."""
    out = list(texts)
    if not out:
        raise SinkProbeInputError("no texts given; pass at least one text")
    return out
