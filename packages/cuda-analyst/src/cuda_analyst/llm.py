"""LLM access through llmcore's backends, and the seeded planted-effects ``MockLLM``.

Every LLM is a ``llmcore.generation.GenerationBackend``: ``hf:PATH`` / ``vllm:PATH`` /
``openai:URL#MODEL`` (key from an environment variable, never logged) or ``mock[:strong|weak]``.
The mock reads the injected decision block and writes one of the task's pre-written candidates
with probabilities that are a known function of the feedback present (the planted effects).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from cuda_analyst.candidates import candidate
from cuda_analyst.errors import AnalystValueError
from cuda_analyst.feedback import PLAN_MARK, SUMMARY_MARK, code_sha
from cuda_analyst.prompting import ANCHOR, DECISION_HEADER, extract_code

_TASK = re.compile(r"Kernel task: (\w+)")
_STATUS = re.compile(r"^- status: (\w+)", re.M)
_SHA = re.compile(r"program sha256 ([0-9a-f]{12})")
_SECTION = re.compile(r"^## (\w+)", re.M)


class MockLLM:
    """Seeded planted-effects policy implementing ``GenerationBackend``.

    Per trial the candidate is correct with probability ``q`` (:meth:`success_probability`):
    without a decision block ``q = 0.15``; with a block computed on another program
    (misaligned) ``q = 0.03``; otherwise ``0.02 + 0.58 D`` for a failed parent and
    ``0.02 + 0.03 A + 0.55 A P`` for a passing one (D, A, P: debugger, analyzer, profiler
    sections present; the reference player has no effect). The ``weak`` policy multiplies ``q``
    by 0.4, or by 0.8 when the plan in the block was written by the ``strong`` policy. Correct
    candidates are fast or slow and wrong ones fail to build or mismatch, half and half. Draws
    depend only on (mock seed, request seed, prompt index), not on the prompt: masks compared
    with the same request seeds share their random numbers (common random numbers)."""

    def __init__(
        self, policy: str = "strong", seed: int = 0, *, codeless_rate: float = 0.0
    ) -> None:
        if policy not in ("strong", "weak"):
            raise AnalystValueError(f"unknown mock policy {policy!r}: use 'strong' or 'weak'")
        self.policy, self.seed, self.codeless_rate = policy, seed, codeless_rate
        self.calls = 0
        self.tokens = 0

    def __repr__(self) -> str:
        return f"MockLLM(policy={self.policy!r}, seed={self.seed})"

    @staticmethod
    def success_probability(
        parent_failed: bool,
        present: Iterable[str] = (),
        *,
        block: bool = True,
        aligned: bool = True,
        policy: str = "strong",
        strong_plan: bool = False,
    ) -> float:
        """The planted per-trial success probability (see the class docstring)."""
        present = set(present)
        if not block:
            q = 0.15
        elif not aligned:
            q = 0.03
        elif parent_failed:
            q = 0.02 + 0.58 * ("d" in present)
        else:
            q = 0.02 + 0.03 * ("a" in present) + 0.55 * ("a" in present and "p" in present)
        if policy == "weak":
            q *= 0.8 if strong_plan else 0.4
        return q

    @staticmethod
    def features(prompt: str) -> dict[str, Any]:
        """What the policy reads from a code-generation prompt."""
        m = _TASK.search(prompt)
        task = m.group(1) if m else ""
        code = extract_code(prompt.split("# Current Program", 1)[-1]) or ""
        st = _STATUS.search(prompt)
        failed = st is None or st.group(1) in ("FAIL", "COMPILE")
        k = prompt.find(DECISION_HEADER)
        block = ""
        if k >= 0:
            end = prompt.find(ANCHOR, k)
            block = prompt[k : end if end > 0 else len(prompt)]
        sections = set(_SECTION.findall(block))
        shas = set(_SHA.findall(block))
        present = {
            x
            for x, n in (
                ("d", "Debugger"),
                ("a", "Analyzer"),
                ("p", "Profiler"),
                ("r", "Reference"),
            )
            if n in sections
        }
        return {
            "task": task,
            "parent_failed": failed,
            "present": present,
            "block": bool(block),
            "aligned": not shas or shas == {code_sha(code)},
            "strong_plan": "[roadmap by strong]" in block,
        }

    def _reply(self, prompt: str, rng: np.random.Generator) -> str:
        if SUMMARY_MARK in prompt:
            body = prompt.split("\n", 2)[-1]
            first = next((ln for ln in body.splitlines()[1:] if ln.strip()), "")
            return f"[summary by {self.policy}] key finding: {first[:160]}"
        if PLAN_MARK in prompt:
            heads = re.findall(r"^### (\w+)", prompt, re.M)
            return (
                f"[roadmap by {self.policy}] Executive summary: address {', '.join(heads) or 'nothing'}. "
                "BLOCKER: correctness first. BOTTLENECK: memory traffic. Plan: 1) fix 2) tile 3) tune."
            )
        f = self.features(prompt)
        q = self.success_probability(
            f["parent_failed"], f["present"], block=f["block"], aligned=f["aligned"],
            policy=self.policy, strong_plan=f["strong_plan"],
        )  # fmt: skip
        u1, u2, u3 = rng.random(3)
        if u3 < self.codeless_rate or not f["task"]:
            return "I would restructure the loops, but here is no code."
        kind = ("fast" if u2 < 0.5 else "slow") if u1 < q else ("fail" if u2 < 0.5 else "wrong")
        return f"Here is the rewrite.\n```c\n{candidate(f['task'], kind)}```\n"

    def generate(self, prompts: list[str], params: Any) -> list[list[Any]]:
        """``GenerationBackend.generate``: ``params.n`` seeded replies per prompt."""
        from llmcore.generation import Completion

        out = []
        for i, prompt in enumerate(prompts):
            rng = np.random.default_rng([self.seed, int(params.seed or 0), i])
            row = []
            for j in range(params.n):
                text = self._reply(prompt, rng)
                self.calls += 1
                self.tokens += len(prompt.split()) + len(text.split())
                row.append(
                    Completion(
                        prompt_index=i,
                        sample_index=j,
                        text=text,
                        token_ids=[],
                        logprobs=None,
                        finish_reason="stop",
                    )
                )
            out.append(row)
        return out


def make_llm(spec: str, **kw: Any) -> Any:
    """``mock[:strong|weak]``, ``hf:PATH_OR_ID``, ``vllm:PATH_OR_ID`` or ``openai:URL#MODEL``."""
    from llmcore.generation import get_backend

    kind, _, rest = spec.partition(":")
    if kind == "mock":
        return MockLLM(rest or "strong", **kw)
    if kind in ("hf", "vllm") and rest:
        return get_backend(kind, rest, **kw)
    if kind == "openai" and "#" in rest:
        url, model = rest.rsplit("#", 1)
        kw.setdefault("api_key_env", "OPENAI_API_KEY")
        return get_backend("openai", model, base_url=url, **kw)
    raise AnalystValueError(
        f"bad LLM spec {spec!r}: use mock[:weak], hf:PATH, vllm:PATH or openai:URL#MODEL"
    )
