"""Non-parametric editing: the retrieval baseline (selective contextual reasoning, reconstructed:
retrieve top-k facts, keep those the model itself judges relevant, answer directly when none is
kept) and IKE (in-context demonstrations). Weights are never touched: the model is wrapped
behind HF ``generate`` kwargs with a prompt transform."""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edit_collapse.errors import EditInputError
from edit_collapse.requests import EditRequest


@dataclass
class PromptFormat:
    """How retrieved facts and the relevance question are written around a query."""

    context: str = "Updated facts:\n{facts}\nUse these facts when they are relevant.\n{query}"
    fact_sep: str = "\n"
    fact_item: str = "- {fact}"
    gate: str = "Fact: {fact}\nQuery: {query}\nIs the fact relevant to answering the query? Answer:"
    yes: str = " Yes"
    no: str = " No"


def world_format() -> PromptFormat:
    """The formats the synthetic world model was trained on."""
    from edit_collapse import world as W

    return PromptFormat(
        context=f"{W.CONTEXT} {{facts}} . {W.QUESTION} {{query}}", fact_sep=" . ",
        fact_item="{fact}", gate=f"{W.GATE_FACT} {{fact}} . {W.GATE_QUERY} {{query}} {W.GATE_ASK}",
        yes=" yes", no=" no",
    )  # fmt: skip


STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "by",
        "with",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "it",
        "its",
        "this",
        "that",
        "and",
        "or",
        "as",
        "from",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "does",
        "do",
        "did",
        "has",
        "have",
        "had",
    ]
)
"""Function words dropped before BM25 scoring (standard IR practice): a query that shares only
these with a fact has no candidate fact."""


def _terms(text: str) -> list[str]:
    return [w for w in text.lower().split() if w not in STOPWORDS]


DEFAULT_ENCODER = "all-MiniLM-L6-v2"
"""The sentence encoder of ``encoder='embed'`` unless ``encoder_name`` names another (a hub id,
or a local folder saved by sentence-transformers)."""


def _is_local_path(name: str) -> bool:
    """Whether ``name`` means a folder on disk rather than a hub id: it exists, or it is written
    as a path (absolute, ``./``, ``../``, ``~``)."""
    return (
        Path(name).expanduser().exists()
        or Path(name).is_absolute()
        or name.startswith(("./", "../", ".\\", "..\\", "~"))
    )


def check_encoder_name(name: str) -> None:
    """Refuse a local ``encoder_name`` that is not a sentence-transformers model folder (one with
    ``modules.json``, as ``SentenceTransformer.save`` writes); hub ids are left to the loader.
    Only the file system is read, so a bad path is refused before any model is loaded."""
    if not _is_local_path(name):
        return
    p = Path(name).expanduser()
    if not p.exists():
        raise EditInputError(f"encoder_name {name!r}: no such folder")
    if not p.is_dir():
        raise EditInputError(
            f"encoder_name {name!r} is a file, not a sentence-transformers model folder"
        )
    if not (p / "modules.json").is_file():
        raise EditInputError(
            f"encoder_name {name!r} is not a sentence-transformers model folder: it has no "
            "modules.json (write one with SentenceTransformer(...).save(folder))"
        )


def _load_sentence_encoder(name: str) -> Any:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as e:
        raise EditInputError("encoder='embed' needs pip install 'edit-collapse[embed]'") from e
    check_encoder_name(name)
    if not _is_local_path(name):
        return SentenceTransformer(name)
    try:
        return SentenceTransformer(str(Path(name).expanduser()), local_files_only=True)
    except Exception as e:  # a damaged folder: name it, with the loader's reason
        raise EditInputError(
            f"encoder_name {name!r}: sentence-transformers could not load this folder "
            f"({type(e).__name__}: {e})"
        ) from e


class Encoder:
    """Similarity search over the memory: ``embed`` (sentence-transformers: ``name`` is a hub id
    or a local model folder), ``bm25`` (rank-bm25) or ``hidden`` (mean-pooled last hidden
    states of the target model). Embeddings of the memory are computed once per memory state;
    each query then costs one encoding."""

    def __init__(
        self, kind: str, model: Any = None, tok: Any = None, name: str = DEFAULT_ENCODER
    ) -> None:
        if kind not in ("embed", "bm25", "hidden"):
            raise EditInputError(f"encoder={kind!r}: use 'embed', 'bm25', 'hidden' or 'auto'")
        self.kind, self.model, self.tok, self.name = kind, model, tok, name
        self._st: Any = None
        self._bm25: tuple[tuple[str, ...], Any] | None = None
        self._docs: dict[tuple[str, ...], Any] = {}
        if kind == "embed":
            self._st = _load_sentence_encoder(name)

    def top_k(
        self, query: str, docs: Sequence[str], k: int, min_score: float | None = None
    ) -> list[int]:
        """Indices of the (at most) ``k`` best ``docs`` for ``query``, best first. ``min_score``
        (``embed``/``hidden`` only) drops those whose cosine similarity is below it."""
        import numpy as np

        if not docs:
            return []
        if self.kind == "bm25":
            from rank_bm25 import BM25Okapi

            key = tuple(docs)
            if self._bm25 is None or self._bm25[0] != key:  # index once per memory state
                self._bm25 = (key, BM25Okapi([_terms(d) for d in docs]))
            bm = self._bm25[1]
            scores = np.asarray(bm.get_scores(_terms(query)))
            order = [int(i) for i in np.argsort(-scores, kind="stable")[:k]]
            if len(docs) > 2:
                # A positive score needs a shared term found in fewer than half of the facts:
                # facts sharing only frequent terms are not candidates.
                return [i for i in order if scores[i] > 0]
            # In a memory of one or two facts every term has idf <= 0: a fact is a candidate
            # when it shares a query term, the one sharing more ranked first.
            terms = set(_terms(query))
            shared = {i: len(terms & set(_terms(d))) for i, d in enumerate(docs)}
            return sorted((i for i in shared if shared[i]), key=lambda i: -shared[i])[:k]
        scores = self._doc_embeddings(docs) @ self._embed([query])[0]
        order = [int(i) for i in np.argsort(-scores, kind="stable")[:k]]
        if min_score is not None:
            order = [i for i in order if scores[i] >= min_score]
        return order

    def _doc_embeddings(self, docs: Sequence[str]) -> Any:
        """Embeddings of ``docs``, computed once per memory state (the last few states kept:
        IKE alternates between its pool and the memory)."""
        key = tuple(docs)
        if key not in self._docs:
            if len(self._docs) >= 4:
                self._docs.pop(next(iter(self._docs)))
            self._docs[key] = self._embed(docs)
        return self._docs[key]

    def _embed(self, texts: Sequence[str]):
        import numpy as np
        import torch

        if self.kind == "embed":
            e = np.asarray(self._st.encode(list(texts), normalize_embeddings=True))
            return e
        from edit_collapse import core

        out = []
        with torch.no_grad():
            for t in texts:
                ids = torch.tensor([core.encode(self.tok, t)], device=core.device_of(self.model))
                h = (
                    self.model(input_ids=ids, output_hidden_states=True)
                    .hidden_states[-1][0]
                    .mean(0)
                )
                out.append(torch.nn.functional.normalize(h.float(), dim=0).cpu().numpy())
        return np.stack(out)


def make_encoder(kind: str, model: Any, tok: Any, name: str = DEFAULT_ENCODER) -> Encoder:
    """``auto``: the sentence encoder if it loads (offline cache included), else BM25. A local
    folder given as ``name`` must load: it is never silently replaced by BM25."""
    if kind != "auto":
        return Encoder(kind, model, tok, name)
    if _is_local_path(name):
        return Encoder("embed", model, tok, name)
    try:
        return Encoder("embed", model, tok, name)
    except Exception as e:  # missing extra, or the encoder cannot be downloaded offline
        warnings.warn(f"retrieval encoder 'embed' unavailable ({e}); using BM25", stacklevel=2)
    return Encoder("bm25", model, tok, name)


@dataclass
class EditedGenerator:
    """A model with a prompt transform: ``generate(input_ids=..., attention_mask=..., **kw)``
    rewrites each prompt through ``transform`` and returns the original ids followed by the new
    tokens, like ``model.generate``. Weights are the base model's."""

    model: Any
    tok: Any
    editor: Any
    last: dict[str, Any] = field(default_factory=dict)

    def transform(self, prompt: str) -> str:
        return self.editor.transform(self.model, self.tok, prompt)

    def transform_many(self, prompts: Sequence[str]) -> list[str]:
        """``[transform(p) for p in prompts]``, batching what the editor can batch."""
        many = getattr(self.editor, "transform_many", None)
        if many is None:
            return [self.transform(p) for p in prompts]
        return many(self.model, self.tok, prompts)

    def generate(self, input_ids: Any = None, attention_mask: Any = None, **kwargs: Any) -> Any:
        import torch

        from edit_collapse import core

        outs = []
        for i in range(input_ids.shape[0]):
            row = input_ids[i] if attention_mask is None else input_ids[i][attention_mask[i].bool()]
            text = self.tok.decode(row, skip_special_tokens=True)
            ids = torch.tensor(
                [core.encode(self.tok, self.transform(text))], device=input_ids.device
            )
            g = self.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **kwargs)
            outs.append(torch.cat([input_ids[i], g[0, ids.shape[1] :]]))
        n = max(len(o) for o in outs)
        pad = core.pad_id(self.tok)
        return torch.stack([torch.cat([o, o.new_full((n - len(o),), pad)]) for o in outs])

    def __call__(self, *a: Any, **kw: Any) -> Any:
        return self.model(*a, **kw)


class RetrievalEditor:
    """Selective contextual reasoning, reconstructed: memory of fact sentences; top-``k`` by the
    encoder; a yes/no relevance gate scored by the model's next-token log-probabilities
    (``log P(yes) - log P(no) > gate_margin``; the default 0 is ``P(yes) > P(no)``, a positive
    margin trades recall of relevant facts for fewer false accepts; ``gate='none'`` keeps all);
    direct answer when nothing is kept. ``encoder`` is ``auto``, ``embed``, ``bm25`` or
    ``hidden``; with ``embed`` (or ``auto``), ``encoder_name`` is the sentence encoder: a hub id
    or a local folder saved by sentence-transformers, which loads offline (a local folder that
    is not one is refused here, before anything is loaded). ``min_score`` (``embed``/``hidden``)
    keeps only facts whose cosine similarity to the query reaches it, so a query unrelated to
    every fact is answered directly, as BM25 does for a query sharing no rare term with a fact
    (a sentence encoder always returns ``k`` facts otherwise; default ``None``: no floor)."""

    name = "retrieval"
    parametric = False

    def __init__(self, k: int = 3, encoder: str = "auto", gate: str = "yesno",
                 fmt: PromptFormat | None = None, encoder_name: str = DEFAULT_ENCODER,
                 gate_margin: float = 0.0, min_score: float | None = None) -> None:  # fmt: skip
        if gate not in ("yesno", "none"):
            raise EditInputError(f"gate={gate!r}: use 'yesno' or 'none'")
        if k < 1:
            raise EditInputError(f"k={k} must be >= 1")
        if min_score is not None:
            if encoder == "bm25":
                raise EditInputError(
                    "min_score is a cosine-similarity floor of the 'embed' and 'hidden' "
                    "encoders; BM25 keeps only facts sharing a rare query term instead"
                )
            if not -1.0 <= float(min_score) <= 1.0:
                raise EditInputError(f"min_score={min_score}: a cosine similarity in [-1, 1]")
        self.min_score = None if min_score is None else float(min_score)
        if encoder in ("embed", "auto"):
            check_encoder_name(encoder_name)
        self.k, self.gate, self.encoder_kind, self.encoder_name = k, gate, encoder, encoder_name
        self.gate_margin = float(gate_margin)
        self.fmt = fmt or PromptFormat()
        self.memory: list[str] = []
        self._enc: Encoder | None = None
        self.stats = {"queries": 0, "kept": 0, "gate_pairs": 0}

    def apply(
        self, model: Any, tok: Any, requests: Sequence[EditRequest], sequential: bool = True
    ) -> Any:
        """Append the requests' facts to the memory (weights untouched)."""
        from edit_collapse.editors import EditHandle

        t0 = time.perf_counter()
        n0 = len(self.memory)
        self.memory += [r.fact() for r in requests]
        h = EditHandle(model, editor=self.name, n_requests=len(requests))

        def pop() -> None:
            del self.memory[n0:]

        h.on_restore.append(pop)
        h.time_s = time.perf_counter() - t0
        return h

    def wrap(self, model: Any, tok: Any) -> EditedGenerator:
        return EditedGenerator(model, tok, self)

    def retrieve(self, model: Any, tok: Any, query: str) -> list[str]:
        if self._enc is None:
            self._enc = make_encoder(self.encoder_kind, model, tok, self.encoder_name)
        hits = self._enc.top_k(query, self.memory, self.k, self.min_score)
        return [self.memory[i] for i in hits]

    def relevant(self, model: Any, tok: Any, query: str, facts: Sequence[str]) -> list[str]:
        """Facts whose relevance question the model answers yes: one forward over the ``k``
        questions comparing the next-token logits of the two answers when each is one token
        (the decision ``log P(yes) > log P(no)``), else ``completion_logprobs`` of both."""
        if self.gate == "none" or not facts:
            return list(facts)
        from llmcore.metrics import completion_logprobs

        prompts = [self.fmt.gate.format(fact=f, query=query) for f in facts]
        yes_no = self._answer_tokens(tok)
        if yes_no is not None:  # one forward over the k questions, next-token logits compared
            lp = self._next_token_logits(model, tok, prompts)
            self.stats["gate_pairs"] += len(prompts)
            return [f for f, keep in zip(facts, self._keep(lp, yes_no), strict=True) if keep]
        pairs = []
        for q in prompts:
            pairs += [(q, self.fmt.yes), (q, self.fmt.no)]
        lp = completion_logprobs(model, tok, pairs, reduce="sum")
        self.stats["gate_pairs"] += len(pairs)
        return [f for i, f in enumerate(facts) if lp[2 * i] - lp[2 * i + 1] > self.gate_margin]

    def _keep(self, logits: Any, yes_no: tuple[int, int]) -> list[bool]:
        """``logit(yes) - logit(no) > gate_margin`` per row (the same softmax normaliser cancels:
        that is ``log P(yes) - log P(no)``)."""
        d = logits[:, yes_no[0]] - logits[:, yes_no[1]]
        return [bool(x > self.gate_margin) for x in d]

    def relevant_many(
        self, model: Any, tok: Any, queries: Sequence[str], facts: Sequence[Sequence[str]],
        per_forward: int = 1,
    ) -> list[list[str]]:  # fmt: skip
        """``[relevant(q, f) for q, f in zip(queries, facts)]``: each query's ``k`` questions
        are one forward as in :meth:`relevant` (the same padded rows, so the same logits and
        decisions); ``per_forward`` > 1 packs that many queries' questions into one forward,
        faster for a small model, at the price of the float rounding of another batch shape."""
        yes_no = self._answer_tokens(tok)
        if self.gate == "none" or yes_no is None or per_forward <= 1:
            return [self.relevant(model, tok, q, f) for q, f in zip(queries, facts, strict=True)]
        out: list[list[str]] = [[] for _ in queries]
        todo = [i for i, f in enumerate(facts) if f]
        for s in range(0, len(todo), per_forward):
            idx = todo[s : s + per_forward]
            prompts = [
                self.fmt.gate.format(fact=f, query=queries[i]) for i in idx for f in facts[i]
            ]
            keep = self._keep(self._next_token_logits(model, tok, prompts), yes_no)
            self.stats["gate_pairs"] += len(prompts)
            j = 0
            for i in idx:
                out[i] = [
                    f for f, kp in zip(facts[i], keep[j : j + len(facts[i])], strict=True) if kp
                ]
                j += len(facts[i])
        return out

    def _answer_tokens(self, tok: Any) -> tuple[int, int] | None:
        """The ids of the yes and no answers when each is one token (else ``None``)."""
        yes = tok(self.fmt.yes, add_special_tokens=False)["input_ids"]
        no = tok(self.fmt.no, add_special_tokens=False)["input_ids"]
        return (yes[0], no[0]) if len(yes) == 1 and len(no) == 1 and yes != no else None

    @staticmethod
    def _next_token_logits(model: Any, tok: Any, prompts: Sequence[str]) -> Any:
        """Next-token logits after each prompt (BOS rule of ``core.encode``), one padded pass."""
        import torch

        from edit_collapse import core

        rows = [core.encode(tok, p) for p in prompts]
        ids, att = core.pad_right(rows, core.pad_id(tok), core.device_of(model))
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=att, use_cache=False).logits
        last = torch.tensor([len(r) - 1 for r in rows], device=logits.device)
        return logits[torch.arange(len(rows), device=logits.device), last].float()

    def transform(self, model: Any, tok: Any, query: str) -> str:
        self.stats["queries"] += 1
        return self._compose(
            query, self.relevant(model, tok, query, self.retrieve(model, tok, query))
        )

    def transform_many(
        self, model: Any, tok: Any, queries: Sequence[str], per_forward: int = 16
    ) -> list[str]:
        """:meth:`transform` of many queries (evaluation): the relevance questions of
        ``per_forward`` queries share one forward (:meth:`relevant_many`)."""
        queries = list(queries)
        self.stats["queries"] += len(queries)
        facts = [self.retrieve(model, tok, q) for q in queries]
        kept = self.relevant_many(model, tok, queries, facts, per_forward)
        return [self._compose(q, k) for q, k in zip(queries, kept, strict=True)]

    def _compose(self, query: str, kept: Sequence[str]) -> str:
        if not kept:
            return query
        self.stats["kept"] += len(kept)
        facts = self.fmt.fact_sep.join(self.fmt.fact_item.format(fact=f) for f in kept)
        return self.fmt.context.format(facts=facts, query=query)

    def save(self, path: str | Path) -> Path:
        """The memory as JSONL of facts."""
        from llmcore.data import write_jsonl

        write_jsonl(path, [{"fact": f} for f in self.memory])
        return Path(path)


class IKEEditor(RetrievalEditor):
    """IKE (Zheng et al. 2023): ``k`` demonstrations retrieved from a training pool, each
    ``New Fact: ... / Prompt: ...``, then the new fact and the query."""

    name = "ike"

    def __init__(self, k: int = 16, pool: Sequence[EditRequest] = (), encoder: str = "auto",
                 encoder_name: str = DEFAULT_ENCODER) -> None:  # fmt: skip
        super().__init__(k=1, encoder=encoder, gate="none", encoder_name=encoder_name)
        self.k_demos = k
        self.pool = [f"New Fact: {r.fact()}\nPrompt: {r.prompt} {r.target_new}" for r in pool]

    def transform_many(
        self, model: Any, tok: Any, queries: Sequence[str], per_forward: int = 16
    ) -> list[str]:
        return [self.transform(model, tok, q) for q in queries]

    def transform(self, model: Any, tok: Any, query: str) -> str:
        self.stats["queries"] += 1
        if self._enc is None:
            self._enc = make_encoder(self.encoder_kind, model, tok, self.encoder_name)
        demos = [self.pool[i] for i in self._enc.top_k(query, self.pool, self.k_demos)]
        new = [self.memory[i] for i in self._enc.top_k(query, self.memory, 1)]
        parts = [*demos[::-1], *(f"New Fact: {f}" for f in new)]
        return "\n\n".join([*parts, f"Prompt: {query}"]) if new else query
