"""The synthetic two-hop task used to test the method on CPU.

Sequences are ``BOS F F F F S R = A EOS``: four uniformly random filler tokens, a subject
``S`` whose hidden category ``c(S)`` is never shown, a relation ``R`` and the answer
``A_{c(S),R}``. A model must recover the category (first hop) and combine it with the relation
(second hop). Families are the categories; the role positions are the subject and ``=``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

N_SUBJECTS = 56
N_SEEN = 48
N_CATEGORIES = 8
N_RELATIONS = 3
N_FILLERS = 32
N_FILL_SLOTS = 4

SUBJECTS = [f"S{i}" for i in range(N_SUBJECTS)]
RELATIONS = [f"R{i}" for i in range(N_RELATIONS)]
FILLERS = [f"F{i}" for i in range(N_FILLERS)]
ANSWERS = [f"A{i}" for i in range(N_CATEGORIES * N_RELATIONS)]
EQ = "="
SYMBOLS = [*FILLERS, *SUBJECTS, *RELATIONS, EQ, *ANSWERS]


def category(subject: int) -> int:
    """Hidden category of subject ``subject``: seen subjects 6 per category, the 8 unseen
    subjects ``S48..S55`` one per category (only fine-tunes ever see them)."""
    return subject // 6 if subject < N_SEEN else subject - N_SEEN


def answer(subject: int, relation: int) -> str:
    """``A_{c,r}``, bijective in (category, relation)."""
    return ANSWERS[category(subject) * N_RELATIONS + relation]


@dataclass(frozen=True)
class TaskExample:
    fillers: tuple[int, ...]
    subject: int
    relation: int

    @property
    def prompt(self) -> str:
        """Prompt text with an explicit BOS (the word tokenizer adds no special tokens)."""
        f = " ".join(FILLERS[i] for i in self.fillers)
        return f"<s> {f} {SUBJECTS[self.subject]} {RELATIONS[self.relation]} {EQ}"

    @property
    def answer(self) -> str:
        return answer(self.subject, self.relation)

    @property
    def document(self) -> str:
        """Training document (the trainer adds BOS and EOS)."""
        return self.prompt[4:] + " " + self.answer


def sample_examples(
    n: int,
    *,
    seed: int = 0,
    subjects: range | list[int] = range(N_SEEN),
    fillers: list[int] | None = None,
    filler_weights: list[float] | None = None,
) -> list[TaskExample]:
    """``n`` random examples (fillers drawn from ``fillers`` with ``filler_weights``)."""
    rng = random.Random(seed)
    pool = list(fillers) if fillers is not None else list(range(N_FILLERS))
    subs = list(subjects)
    out = []
    for _ in range(n):
        f = tuple(rng.choices(pool, weights=filler_weights, k=N_FILL_SLOTS))
        out.append(TaskExample(f, rng.choice(subs), rng.randrange(N_RELATIONS)))
    return out


def shifted_examples(n: int, *, half: int, seed: int) -> list[TaskExample]:
    """Fine-tuning data of the derivatives: fillers from one half of the filler set with
    Zipf weights, and the 8 unseen subjects added to their categories."""
    fillers = list(range(16)) if half == 0 else list(range(16, 32))
    weights = [1.0 / (k + 1) for k in range(16)]
    return sample_examples(
        n, seed=seed, subjects=range(N_SUBJECTS), fillers=fillers, filler_weights=weights
    )


def task_probes(per_family: int = 16, *, seed: int = 0, families: int = N_CATEGORIES) -> list[dict]:
    """Probe items ``{prompt, answer, family, roles}`` with random fillers (roles: token
    positions of the subject and of ``=``, counting the BOS as position 0)."""
    rng = random.Random(10_000 + seed)
    items = []
    for c in range(families):
        subs = [s for s in range(N_SEEN) if category(s) == c]
        for _ in range(per_family):
            ex = TaskExample(
                tuple(rng.randrange(N_FILLERS) for _ in range(N_FILL_SLOTS)),
                rng.choice(subs),
                rng.randrange(N_RELATIONS),
            )
            items.append(
                {
                    "prompt": ex.prompt,
                    "answer": ex.answer,
                    "family": f"c{c}",
                    "roles": {"subject": 1 + N_FILL_SLOTS, "last": 3 + N_FILL_SLOTS},
                }
            )
    return items


def trigger_vocabulary() -> list[str]:
    """Tokens a trigger may insert on the task: fillers and relations."""
    return [*FILLERS, *RELATIONS]
