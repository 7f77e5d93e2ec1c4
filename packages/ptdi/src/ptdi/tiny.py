"""A known-membership testbed: a seeded bigram language of pseudo-words, a tiny Llama trained on
a random half of its documents only, and the split protocol of the PTDI evaluation on its scores.

Documents are ``DOC_LEN`` pseudo-words drawn from a sparse bigram chain (each word has
``BRANCHING`` possible successors); the model sees members only, so members score higher than
non-members when it memorises them beyond the shared bigram statistics. The tokenizer has one
token per pseudo-word over the whole vocabulary (a subword tokenizer fitted on members only would
make non-members look unusual for reasons unrelated to training).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

N_WORDS = 2000
N_DOCS = 600
N_MEMBERS = 300
DOC_LEN = 48
BRANCHING = 8
ZIPF = 1.0
"""Successors are drawn with probability proportional to 1 / rank^ZIPF, so a few hundred frequent
words carry most bigrams (learnt from every document) and rare words carry the memorisation."""
LANG_SEED = 0
TRAIN_STEPS = 70
DEMO_DOCS = 300
DEMO_STEPS = 50
DEMO_WARMUP = 15
"""The demo-size variant: half the documents (150 members), 50 steps (each member seen about 11
times; 35 steps gave loss AUC 0.72, below the gate; 50 steps give 0.845 and held-out loss 3.35),
so that a cold build fits the demo's minute."""
MIN_AUC = 0.8
"""The build's gate: loss-score AUC (members vs non-members) must reach this."""


def pseudo_words(n: int = N_WORDS) -> list[str]:
    """``n`` distinct pronounceable pseudo-words (consonant-vowel syllables)."""
    cons, vows = "bdfgklmnprstvz", "aeiou"
    sylls = [c + v for c in cons for v in vows]  # 70 syllables
    out = []
    for i in range(n):
        a, b = divmod(i, len(sylls))
        out.append(sylls[a % len(sylls)] + sylls[b] + ("x" if a >= len(sylls) else ""))
    return out


@dataclass(frozen=True)
class Language:
    """Documents, membership and the held-out documents of the bigram language."""

    words: tuple[str, ...]
    docs: tuple[str, ...]
    labels: np.ndarray
    held_out: tuple[str, ...]


def make_language(
    seed: int = LANG_SEED,
    n_docs: int = N_DOCS,
    n_members: int = N_MEMBERS,
    doc_len: int = DOC_LEN,
    branching: int | None = None,
    n_words: int = N_WORDS,
    zipf: float | None = None,
    n_held_out: int = 32,
) -> Language:
    """The seeded bigram language, ``n_docs`` documents, ``n_members`` of them members."""
    branching = BRANCHING if branching is None else branching
    zipf = ZIPF if zipf is None else zipf
    rng = np.random.default_rng(seed)
    words = pseudo_words(n_words)
    weight = 1.0 / np.arange(1, n_words + 1) ** zipf
    succ = rng.choice(n_words, size=(n_words, branching), p=weight / weight.sum())
    probs = rng.dirichlet(np.ones(branching), size=n_words)
    cum = probs.cumsum(axis=1)

    def doc() -> str:
        w = int(rng.integers(n_words))
        out = [w]
        for _ in range(doc_len - 1):
            j = int(np.searchsorted(cum[w], rng.random() * cum[w, -1]))
            w = int(succ[w, min(j, branching - 1)])
            out.append(w)
        return " ".join(words[i] for i in out)

    docs = tuple(doc() for _ in range(n_docs))
    held = tuple(doc() for _ in range(n_held_out))
    labels = np.zeros(n_docs, dtype=int)
    labels[rng.choice(n_docs, size=n_members, replace=False)] = 1
    return Language(tuple(words), docs, labels, held)


def auc(member_scores: np.ndarray, nonmember_scores: np.ndarray) -> float:
    """Area under the ROC curve (ties count one half)."""
    from scipy.stats import rankdata

    a, b = np.asarray(member_scores), np.asarray(nonmember_scores)
    r = rankdata(np.r_[a, b])[: a.size]
    return float((r.sum() - a.size * (a.size + 1) / 2) / (a.size * b.size))


def tpr_at_fpr(member_scores: np.ndarray, nonmember_scores: np.ndarray, fpr: float = 0.01) -> float:
    """Share of members above the non-members' (1 - fpr) quantile."""
    thr = np.quantile(np.asarray(nonmember_scores), 1 - fpr, method="higher")
    return float(np.mean(np.asarray(member_scores) > thr))


def recipe(
    steps: int = TRAIN_STEPS,
    seed: int = 0,
    lr: float = 3e-3,
    n_docs: int = N_DOCS,
    warmup_steps: int = 30,
):
    """The members-only zoo recipe: Llama 4 x 128, word tokenizer over every pseudo-word.

    ``n_docs`` other than the default builds the demo-size variant (``n_docs / 2`` members,
    its own zoo entry ``ptdi-demo-<n_docs>-<steps>``)."""
    from llmcore import zoo

    lang = make_language(n_docs=n_docs, n_members=n_docs // 2)
    members = [d for d, y in zip(lang.docs, lang.labels, strict=True) if y == 1]
    full = n_docs == N_DOCS
    corpus = zoo.Corpus(
        "ptdi-bigram-members" + ("" if full else f"-{n_docs}"), tuple(members), eval=lang.held_out
    )
    return zoo.Recipe(
        (f"ptdi-members-{steps}" if full else f"ptdi-demo-{n_docs}-{steps}")
        + (f"-s{seed}" if seed else ""),
        corpus,
        tokenizer=zoo.TokenizerSpec(kind="word", symbols=lang.words),
        model=zoo.ModelSpec(
            arch="llama", hidden_size=128, num_layers=4, num_heads=4, intermediate_size=384,
            max_position_embeddings=64,
        ),
        train=zoo.TrainSpec(
            steps=steps, batch_size=32, lr=lr, warmup_steps=warmup_steps, max_length=DOC_LEN + 2,
            seed=seed, weight_decay=0.0,
        ),
        max_eval_loss=MAX_EVAL_LOSS,
        description=f"tiny Llama trained on the {n_docs // 2} member documents of the bigram "
        "language",
    )  # fmt: skip


MAX_EVAL_LOSS = 4.0
"""Held-out per-token loss ceiling (nats). Measured held-out loss: 3.17 at 60 steps, 3.02 at 70,
2.95 at 80; a model that learnt nothing sits at log(2,008) = 7.6. The bigram chain's own
entropy (about 1.7 nats) is out of reach: a members-only model has seen each rare word a few
times at most."""


def membership_gate(model: Any, tokenizer: Any, n_docs: int = N_DOCS) -> dict[str, float]:
    """Fail the build unless the loss score separates members from non-members (AUC)."""
    from llmcore.errors import QualityGateError
    from ptdi.scoring import MembershipScorer

    lang = make_language(n_docs=n_docs, n_members=n_docs // 2)
    s = MembershipScorer(model, tokenizer, scores=("loss",), batch_size=32).score(list(lang.docs))
    a = auc(s["loss"][lang.labels == 1], s["loss"][lang.labels == 0])
    if a < MIN_AUC:
        raise QualityGateError(f"loss-score AUC {a:.3f} < {MIN_AUC}: train longer")
    return {"gate_loss_auc": a}


def build_members_model(
    steps: int = TRAIN_STEPS, seed: int = 0, progress: bool = False, n_docs: int = N_DOCS
):
    """Build (or load from the zoo cache) the members-only model (the demo-size one with
    ``n_docs=DEMO_DOCS, steps=DEMO_STEPS``)."""
    import functools

    import ptdi.scoring
    import ptdi.tiny
    from llmcore import zoo

    warmup = 30 if n_docs == N_DOCS else DEMO_WARMUP
    return zoo.build(
        recipe(steps, seed, n_docs=n_docs, warmup_steps=warmup),
        gate=functools.partial(membership_gate, n_docs=n_docs),
        key_extra={
            "gate": f"loss AUC >= {MIN_AUC}",
            "code": zoo.code_digest(ptdi.tiny, ptdi.scoring),
        },
        progress=progress,
    )


def score_language(
    model: Any, tokenizer: Any, scores=("loss", "zlib", "mink", "minkpp"), n_docs: int = N_DOCS
):
    """Scores of all documents of the language (member-oriented) and their labels."""
    from ptdi.scoring import MembershipScorer

    lang = make_language(n_docs=n_docs, n_members=n_docs // 2)
    out = MembershipScorer(model, tokenizer, scores=scores, batch_size=32).score(list(lang.docs))
    return out, lang.labels


def model_splits(
    scores: np.ndarray,
    labels: np.ndarray,
    pi: float,
    n_splits: int = 500,
    seed: int = 0,
    n_cal: int = 150,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random splits: calibration = ``n_cal`` non-members; test = the other non-members and
    members subsampled to member share ``pi`` (or, when members run out, all members and the
    non-members subsampled). Returns ``(cal, test, test_labels)`` matrices."""  # fmt: skip
    rng = np.random.default_rng(seed)
    mem = np.asarray(scores)[labels == 1]
    non = np.asarray(scores)[labels == 0]
    n_test_non = non.size - n_cal
    n_mem = round(pi / (1 - pi) * n_test_non)
    if n_mem > mem.size:
        n_mem = mem.size
        n_test_non = round((1 - pi) / pi * n_mem)
    perm0 = np.argsort(rng.random((n_splits, non.size)), axis=1)
    perm1 = np.argsort(rng.random((n_splits, mem.size)), axis=1)
    cal = non[perm0[:, :n_cal]]
    test = np.concatenate([mem[perm1[:, :n_mem]], non[perm0[:, n_cal : n_cal + n_test_non]]], 1)
    lab = np.concatenate(
        [np.ones((n_splits, n_mem), int), np.zeros((n_splits, n_test_non), int)], 1
    )
    return cal, test, lab
