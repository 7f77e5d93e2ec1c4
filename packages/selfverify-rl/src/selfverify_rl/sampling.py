"""Verification samples from generation rollouts (the paper's balanced builder) and the buffer.

:func:`build_verification_samples` implements the construction of Sec. 2.2 of the method
(self-verification task format) step by step: group rollouts by problem, drop invalid ones,
take priority and reserve candidates from mixed and all-correct groups, fill ``floor(G/2)`` "No"
and ``floor(G/2)`` "Yes" candidates, shuffle. :class:`VerificationBuffer` holds samples between
the verification rounds of the alternating schedule.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from selfverify_rl.errors import SelfVerifyConfigError, SelfVerifyDataError
from selfverify_rl.prompts import Style, verification_prompt
from selfverify_rl.rewards import extract_boxed, normalize_answer

__all__ = [
    "BuildStats",
    "Rollout",
    "VerificationBuffer",
    "VerificationSample",
    "VerificationSamples",
    "build_verification_samples",
    "candidate_text",
    "fit_verification_prompt",
]

log = logging.getLogger(__name__)

VerificationMode = Literal["judge_answer", "judge_response"]
VERIFICATION_MODES = ("judge_answer", "judge_response")


@dataclass(frozen=True)
class Rollout:
    """One generation rollout with its binary reward and whether a boxed answer was found."""

    problem_id: str
    question: str
    completion: str
    reward: float
    valid: bool


@dataclass(frozen=True)
class VerificationSample:
    """One verification prompt: ``label`` is "Yes" iff the candidate came from a correct
    rollout; ``pass_rate`` is its source group's pass rate; ``source_index`` indexes the
    rollout list it was built from."""

    prompt: str
    label: Literal["Yes", "No"]
    pass_rate: float
    problem_id: str
    source_index: int
    question: str = ""
    candidate: str = ""


@dataclass
class BuildStats:
    """What one build saw: groups with a valid rollout (``n_groups``), all-wrong / all-right
    group rates, candidates per class, and prompts whose candidate was left-truncated."""

    n_groups: int = 0
    n_all_wrong: int = 0
    n_all_right: int = 0
    n_yes: int = 0
    n_no: int = 0
    n_invalid: int = 0
    n_truncated: int = 0

    @property
    def all_wrong_rate(self) -> float:
        return self.n_all_wrong / self.n_groups if self.n_groups else 0.0

    @property
    def all_right_rate(self) -> float:
        return self.n_all_right / self.n_groups if self.n_groups else 0.0

    @property
    def balanced(self) -> bool:
        return self.n_yes == self.n_no


class VerificationSamples(list):  # type: ignore[type-arg]
    """A list of :class:`VerificationSample` with the :class:`BuildStats` of its build."""

    def __init__(self, items: Iterable[VerificationSample] = (), stats: BuildStats | None = None):
        super().__init__(items)
        self.stats = stats or BuildStats()


def candidate_text(completion: str, mode: str = "judge_answer") -> str:
    """What the verifier sees: the extracted, normalised final answer (``judge_answer``) or
    the full response (``judge_response``)."""
    if mode == "judge_answer":
        box = extract_boxed(completion)
        return normalize_answer(box) if box is not None else ""
    if mode == "judge_response":
        return completion
    raise SelfVerifyConfigError(f"verification_mode={mode!r}: use one of {VERIFICATION_MODES}")


def fit_verification_prompt(
    question: str,
    candidate: str,
    style: Style = "plain",
    tokenizer: Any = None,
    max_prompt_tokens: int | None = None,
) -> tuple[str, bool]:
    """The verification prompt, with the candidate cut from the left until the prompt fits in
    ``max_prompt_tokens`` (returns ``(prompt, truncated)``); a question that does not fit even
    with an empty candidate raises :class:`SelfVerifyDataError`."""
    prompt = verification_prompt(question, candidate, style, tokenizer)
    if tokenizer is None or not max_prompt_tokens:
        return prompt, False

    def n_tokens(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    if n_tokens(prompt) <= max_prompt_tokens:
        return prompt, False
    empty = n_tokens(verification_prompt(question, "", style, tokenizer))
    if empty > max_prompt_tokens:
        raise SelfVerifyDataError(
            f"question {question[:60]!r}... needs {empty} prompt tokens without any candidate, "
            f"over max_prompt_tokens={max_prompt_tokens}; drop the question or raise the limit"
        )
    ids = tokenizer(candidate, add_special_tokens=False)["input_ids"]
    keep = max_prompt_tokens - empty
    while keep > 0:
        cut = tokenizer.decode(ids[-keep:], skip_special_tokens=True)
        prompt = verification_prompt(question, cut, style, tokenizer)
        if n_tokens(prompt) <= max_prompt_tokens:
            return prompt, True
        keep -= 1
    return verification_prompt(question, "", style, tokenizer), True


def build_verification_samples(
    rollouts: Sequence[Rollout],
    n: int,
    mode: str = "judge_answer",
    rng: random.Random | None = None,
    *,
    style: Style = "plain",
    tokenizer: Any = None,
    max_prompt_tokens: int | None = None,
) -> VerificationSamples:
    """Balanced verification samples from one generation batch (``n`` rollouts per problem).

    1. group by ``problem_id``, drop invalid rollouts; G = groups with a valid rollout;
    2. pass rate ``p = #(reward >= 0.5) / n`` (denominator ``n``, not the valid count);
    3. mixed group: pop a random correct (priority-Yes) and wrong (priority-No) rollout, then one
       more of each if left (reserve-Yes / reserve-No);
    4. all-correct group: one random rollout as reserve-Yes; all-wrong group: skipped;
    5. fill ``floor(G/2)`` per class from priority, then reserve without, then with replacement;
       concatenate No + Yes and shuffle. A class without candidates leaves the batch smaller and
       unbalanced (logged).
    """
    if mode not in VERIFICATION_MODES:
        raise SelfVerifyConfigError(f"verification_mode={mode!r}: use one of {VERIFICATION_MODES}")
    if n < 1:
        raise SelfVerifyConfigError(f"n={n}: rollouts per problem must be >= 1")
    rng = rng or random.Random(0)
    stats = BuildStats()
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(rollouts):
        if not r.valid:
            stats.n_invalid += 1
            continue
        groups.setdefault(r.problem_id, []).append(i)
    stats.n_groups = len(groups)
    prio = {"Yes": [], "No": []}  # type: dict[str, list[tuple[int, float]]]
    reserve = {"Yes": [], "No": []}  # type: dict[str, list[tuple[int, float]]]
    for idx in groups.values():
        right = [i for i in idx if rollouts[i].reward >= 0.5]
        wrong = [i for i in idx if rollouts[i].reward < 0.5]
        p = len(right) / n
        if right and wrong:
            for label, pool in (("Yes", right), ("No", wrong)):
                prio[label].append((pool.pop(rng.randrange(len(pool))), p))
                if pool:
                    reserve[label].append((pool.pop(rng.randrange(len(pool))), p))
        elif right:
            stats.n_all_right += 1
            reserve["Yes"].append((right[rng.randrange(len(right))], p))
        else:
            stats.n_all_wrong += 1
    half = stats.n_groups // 2
    chosen: dict[str, list[tuple[int, float]]] = {}
    for label in ("No", "Yes"):
        picked = list(prio[label][:half])
        pool = list(reserve[label])
        while len(picked) < half and pool:
            picked.append(pool.pop(rng.randrange(len(pool))))
        while len(picked) < half and reserve[label]:
            picked.append(reserve[label][rng.randrange(len(reserve[label]))])
        chosen[label] = picked[:half]
    stats.n_no, stats.n_yes = len(chosen["No"]), len(chosen["Yes"])
    if not stats.balanced:
        log.info(
            "verification batch unbalanced: %d Yes / %d No from %d groups (half=%d)",
            stats.n_yes,
            stats.n_no,
            stats.n_groups,
            half,
        )
    out = []
    for label in ("No", "Yes"):
        for i, p in chosen[label]:
            r = rollouts[i]
            cand = candidate_text(r.completion, mode)
            prompt, cut = fit_verification_prompt(
                r.question, cand, style, tokenizer, max_prompt_tokens
            )
            stats.n_truncated += cut
            out.append(VerificationSample(prompt, label, p, r.problem_id, i, r.question, cand))  # type: ignore[arg-type]
    rng.shuffle(out)
    if stats.n_truncated:
        log.info("left-truncated %d verification candidate(s) to fit", stats.n_truncated)
    return VerificationSamples(out, stats)


@dataclass
class VerificationBuffer:
    """Verification samples waiting for the next verification round (append / shuffle / chunk /
    flush). Samples are up to ``verification_interval`` steps stale when used."""

    items: list[VerificationSample] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.items)

    def append(self, samples: Iterable[VerificationSample]) -> None:
        self.items.extend(samples)

    def shuffle(self, rng: random.Random) -> None:
        rng.shuffle(self.items)

    def chunk(self, size: int) -> list[VerificationSample]:
        """Pop and return the first ``size`` samples (fewer if the buffer holds fewer)."""
        if size < 1:
            raise SelfVerifyConfigError(f"chunk size={size}: must be >= 1")
        out, self.items = self.items[:size], self.items[size:]
        return out

    def flush(self) -> int:
        """Discard what is left; returns how many samples were dropped."""
        n = len(self.items)
        self.items = []
        return n
