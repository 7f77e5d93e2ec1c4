"""Black-box verification (method section 2.6): query a suspect on the clean prompts and the
triggers, count matches and decide with a one-sided binomial test."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from circuitprint.errors import VerificationError
from circuitprint.triggers import Signature, vocab_hash


def _first_word(text: str) -> str:
    parts = text.strip().split()
    return parts[0] if parts else ""


class Suspect:
    """A suspect model behind a generation backend: ``answer`` gives the greedy first answer
    token (its text), ``logprobs`` the log-probability of given answers (or raises)."""

    def __init__(self, backend: Any, tokenizer: Any = None) -> None:
        self.backend = backend
        self.tokenizer = tokenizer

    def answer(self, prompts: Sequence[str]) -> list[str]:
        from llmcore.generation import SamplingParams

        out = self.backend.generate(list(prompts), SamplingParams(max_new_tokens=1))
        return [_first_word(c[0].text) for c in out]

    def logprobs(self, prompts: Sequence[str], tokens: Sequence[str]) -> list[float]:
        from llmcore.errors import BackendError

        try:
            sc = self.backend.score([(p, " " + t) for p, t in zip(prompts, tokens, strict=True)])
        except (BackendError, NotImplementedError, AttributeError) as e:
            raise VerificationError(
                f"logprob mode needs a suspect that returns prompt log-probs; "
                f"{type(self.backend).__name__} cannot ({e}). Use mode='top1'"
            ) from e
        return [float(s[0]) for s in sc]

    def retokenizes(self, prompt: str, ids: Sequence[int]) -> bool | None:
        """Whether the suspect's tokenizer reproduces ``ids`` (None when unknown)."""
        if self.tokenizer is None or ids is None:
            return None
        return list(self.tokenizer(prompt)["input_ids"]) == list(ids)


def HFSuspect(model_or_path: Any, tokenizer: Any = None, **kw: Any) -> Suspect:
    """A local Hugging Face model (path, hub id or loaded model) via llmcore's HF backend."""
    from llmcore.generation import get_backend

    kw.setdefault("progress", False)
    kw.setdefault("batch_size", 64)
    be = get_backend("hf", model_or_path, tokenizer=tokenizer, **kw) if tokenizer is not None \
        else get_backend("hf", model_or_path, **kw)  # fmt: skip
    return Suspect(be, be.tokenizer)


def VLLMSuspect(path: str, **kw: Any) -> Suspect:
    """A model served in-process by vLLM (needs the ``vllm`` extra)."""
    from llmcore.generation import get_backend

    return Suspect(get_backend("vllm", path, **kw))


def OpenAICompatSuspect(base_url: str, model: str, **kw: Any) -> Suspect:
    """A model behind an OpenAI-compatible completions endpoint (``openai`` extra). Only
    top1 mode: the OpenAI API returns no prompt log-probs."""
    from llmcore.generation import get_backend

    return Suspect(get_backend("openai", model, base_url=base_url, **kw))


@dataclass
class Verdict:
    """Outcome of :func:`verify`."""

    verdict: Literal["derived", "independent", "inconclusive"]
    tmr: float
    p_value: float
    r0: float
    n_usable: int
    clean_consistency: float
    spearman: float | None
    per_trigger: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def exit_code(self) -> int:
        return {"derived": 0, "independent": 1, "inconclusive": 2}[self.verdict]


def binomial_p(matches: int, n: int, r0: float) -> float:
    """P(Binomial(n, r0) >= matches)."""
    from scipy.stats import binom

    return float(binom.sf(matches - 1, n, r0))


def check_decision(r0: float, p_max: float, tmr_min: float) -> None:
    if not 0.0 < p_max < 1.0:
        raise VerificationError(f"p_max must lie in (0, 1), got {p_max}")
    if not 0.0 < tmr_min <= 1.0:
        raise VerificationError(f"tmr_min must lie in (0, 1], got {tmr_min}")
    if r0 >= tmr_min:
        raise VerificationError(
            f"r0 = {r0:.3f} (reference TMR) >= tmr_min = {tmr_min}: the reference models already "
            "match the triggers as often as a derivative must; the signature cannot separate them"
        )


def verify(
    signature: Signature,
    suspect: Suspect,
    mode: Literal["top1", "logprob"] = "top1",
    reference_tmr: float | Sequence[float] | None = None,
    p_max: float = 1e-3,
    tmr_min: float = 0.5,
) -> Verdict:
    """Section 2.6: 2N queries (clean prompt, trigger). A trigger is usable when the suspect
    answers y on the clean prompt (and, when its tokenizer is known, re-tokenises the trigger
    to the stored ids); match = it answers y' on the trigger. r0 = max(0.05, mean reference
    TMR); p = P(Bin(N_usable, r0) >= matches); ``derived`` iff p <= p_max and TMR >= tmr_min;
    ``inconclusive`` when clean consistency < 0.5, > 50 % of triggers re-tokenise differently
    or nothing is usable. ``logprob`` mode adds the Spearman correlation of
    Delta = log p(y'|x') - log p(y'|x) with the protected model's."""
    import numpy as np

    if mode not in ("top1", "logprob"):
        raise VerificationError(f"mode {mode!r}: use top1 or logprob")
    if reference_tmr is None:
        ref = 0.0
    elif isinstance(reference_tmr, int | float):
        ref = float(reference_tmr)
    else:
        ref = float(np.mean(list(reference_tmr))) if len(reference_tmr) else 0.0
    r0 = max(0.05, ref)
    check_decision(r0, p_max, tmr_min)
    trig = signature.triggers
    if not trig:
        raise VerificationError("the signature has no triggers")
    if signature.tokenizer.get("vocab_hash") and suspect.tokenizer is not None:
        pass  # a different vocabulary shows up below as triggers that re-tokenise differently
    clean = suspect.answer([t["prompt"] for t in trig])
    shifted = suspect.answer([t["trigger_prompt"] for t in trig])
    tok_ok = [suspect.retokenizes(t["trigger_prompt"], t.get("trigger_ids")) for t in trig]
    n_bad_tok = sum(1 for v in tok_ok if v is False)
    spearman = None
    if mode == "logprob":
        ys = [t["shifted_answer"] for t in trig]
        lp_t = suspect.logprobs([t["trigger_prompt"] for t in trig], ys)
        lp_c = suspect.logprobs([t["prompt"] for t in trig], ys)
        from scipy.stats import spearmanr

        d_s = np.array(lp_t) - np.array(lp_c)
        d_p = np.array([t["protected_logprobs"]["trigger"] - t["protected_logprobs"]["clean"]
                        for t in trig])  # fmt: skip
        rho = spearmanr(d_s, d_p).statistic if len(trig) > 2 else float("nan")
        spearman = None if np.isnan(rho) else float(rho)
    per, usable, matches = [], 0, 0
    for k, t in enumerate(trig):
        u = clean[k] == t["answer"] and tok_ok[k] is not False
        m = u and shifted[k] == t["shifted_answer"]
        usable += u
        matches += m
        per.append({"id": t.get("id", k), "clean_answer": clean[k], "trigger_answer": shifted[k],
                    "usable": bool(u), "match": bool(m), "retokenizes": tok_ok[k]})  # fmt: skip
    consistency = sum(clean[k] == t["answer"] for k, t in enumerate(trig)) / len(trig)
    tmr = matches / usable if usable else 0.0
    p = binomial_p(matches, usable, r0) if usable else 1.0
    msg = ""
    if n_bad_tok > len(trig) / 2:
        verdict, msg = (
            "inconclusive",
            (
                f"{n_bad_tok} of {len(trig)} triggers re-tokenise differently on the suspect "
                "(tokenizer mismatch)"
            ),
        )
    elif usable == 0:
        verdict, msg = "inconclusive", "no usable trigger (the suspect answers no clean prompt)"
    elif consistency < 0.5:
        verdict, msg = (
            "inconclusive",
            (f"clean consistency {consistency:.2f} < 0.5: the suspect does not solve the task"),
        )
    else:
        verdict = "derived" if (p <= p_max and tmr >= tmr_min) else "independent"
    return Verdict(verdict, tmr, p, r0, usable, consistency, spearman, per, msg)


def signature_tmr(signature: Signature, suspect: Suspect) -> float:
    """TMR of a (reference) model on a signature, for r0."""
    return verify(signature, suspect, tmr_min=1.0, p_max=0.5).tmr


__all__ = [
    "HFSuspect",
    "OpenAICompatSuspect",
    "Suspect",
    "VLLMSuspect",
    "Verdict",
    "binomial_p",
    "verify",
    "vocab_hash",
]  # fmt: skip
