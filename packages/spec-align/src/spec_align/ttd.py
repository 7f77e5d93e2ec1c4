"""Test-time deliberation methods: raw, vanilla, ZeroThink, MoreThink, Self-Refine,
Best-of-N, TPO and Align3.

Every method runs a batch of prompts in lockstep (stage k of all prompts is one batched backend
call), so the HF backend batches and HTTP backends run concurrently; per-prompt call counts are
those of the paper (Align3 3, MoreThink ``rethink_count``, Self-Refine ``1 + 2·max_iters``, ...).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from spec_align.backends import Backend, Completion, Messages
from spec_align.data import PromptItem, Scenario
from spec_align.errors import SpecConfigError
from spec_align.prompts import DEFAULT_TEMPLATES, Templates

RewardFn = Callable[[PromptItem, str], float]
METHOD_NAMES = (
    "raw",
    "vanilla",
    "zero_think",
    "more_think",
    "self_refine",
    "best_of_n",
    "tpo",
    "align3",
)


@dataclass
class TTDResult:
    """Final response, the thought before it, token usage, model calls and the call trace."""

    response: str
    thought: str
    usage: dict[str, int]
    calls: int
    trace: list[dict[str, Any]] = field(default_factory=list)
    missing_think_close: bool = False


def split_thought(text: str, close: str = "</think>") -> tuple[str, str, bool]:
    """``(thought, response, found)``: text before/after the last ``close``; response is
    left-stripped of newlines. Without ``close``: ``("", text, False)``."""
    i = text.rfind(close)
    if i < 0:
        return "", text, False
    return text[:i], text[i + len(close) :].lstrip("\n"), True


def _usage(comps: list[Completion], *, prompt_once: bool) -> dict[str, int]:
    prompt = comps[0].prompt_tokens if prompt_once else sum(c.prompt_tokens for c in comps)
    completion = sum(c.completion_tokens for c in comps)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prefill_tokens": sum(c.prefilled for c in comps),
    }


def as_item(x: PromptItem | str, i: int = 0) -> PromptItem:
    if isinstance(x, PromptItem):
        return x
    return PromptItem(id=f"prompt-{i}", label="safe", prompt=x, adversarial_prompt=x)


class TTDMethod(ABC):
    """A test-time deliberation method; ``run_batch`` is the implementation."""

    name: str = ""

    def __init__(self, templates: Templates = DEFAULT_TEMPLATES) -> None:
        self.templates = templates

    def config(self) -> dict[str, Any]:
        return {}

    def query(self, item: PromptItem, adversarial: bool) -> str:
        return item.adversarial_prompt if adversarial else item.prompt

    def messages(self, item: PromptItem, s: Scenario, adversarial: bool = True) -> Messages:
        """``M`` = [system, user(augmented prompt)]."""
        return self.templates.messages(
            self.templates.augment_prompt(self.query(item, adversarial), s)
        )

    def run(self, prompt: PromptItem | str, s: Scenario, backend: Backend, **gen: Any) -> TTDResult:
        """Run the method on one prompt (a string or a :class:`PromptItem`)."""
        return self.run_batch([prompt], s, backend, **gen)[0]

    @abstractmethod
    def run_batch(
        self,
        prompts: list[PromptItem | str],
        s: Scenario,
        backend: Backend,
        *,
        adversarial: bool = True,
        **gen: Any,
    ) -> list[TTDResult]: ...

    def _split(self, full: str, comps: list[Completion], trace: list, once: bool) -> TTDResult:
        thought, response, found = split_thought(full, self.templates.think_close)
        return TTDResult(
            response, thought, _usage(comps, prompt_once=once), len(comps), trace, not found
        )


class Vanilla(TTDMethod):
    """One chat call on the augmented prompt."""

    name = "vanilla"
    augment = True

    def run_batch(self, prompts, s, backend, *, adversarial=True, **gen):
        items = [as_item(p, i) for i, p in enumerate(prompts)]
        if self.augment:
            msgs = [self.messages(it, s, adversarial) for it in items]
        else:
            msgs = [self.templates.messages(self.query(it, adversarial)) for it in items]
        outs = backend.chat_many(msgs, **gen)
        res = []
        for m, c in zip(msgs, outs, strict=True):
            r = self._split(c.text, [c], [{"kind": "chat", "messages": m, "text": c.text}], False)
            if r.missing_think_close:
                # Non-thinking output: the whole text is the response (official behaviour).
                r.missing_think_close = self.templates.think_open in c.text
            res.append(r)
        return res


class Raw(Vanilla):
    """The prompt alone, no specification block."""

    name = "raw"
    augment = False


class ZeroThink(TTDMethod):
    """Prefill an empty thinking block: ``gen(M, "<think>\\n</think>")`` (1 call)."""

    name = "zero_think"

    def run_batch(self, prompts, s, backend, *, adversarial=True, **gen):
        t = self.templates
        items = [as_item(p, i) for i, p in enumerate(prompts)]
        msgs = [self.messages(it, s, adversarial) for it in items]
        prefix = f"{t.think_open}\n{t.think_close}"
        outs = backend.continue_many(msgs, [prefix] * len(msgs), None, **gen)
        backend.release(msgs)
        return [
            self._split(
                prefix + c.text,
                [c],
                [{"kind": "continue", "prefix": prefix, "stop": None, "text": c.text}],
                True,
            )
            for c in outs
        ]


class MoreThink(TTDMethod):
    """Budget forcing: ``rethink_count - 1`` forced ``Wait,`` continuations, then a free one."""

    name = "more_think"

    def __init__(self, rethink_count: int = 3, templates: Templates = DEFAULT_TEMPLATES) -> None:
        super().__init__(templates)
        if not isinstance(rethink_count, int) or rethink_count < 1:
            raise SpecConfigError(f"rethink_count={rethink_count!r} must be an int >= 1")
        self.rethink_count = rethink_count

    def config(self):
        return {"rethink_count": self.rethink_count}

    def run_batch(self, prompts, s, backend, *, adversarial=True, **gen):
        t = self.templates
        items = [as_item(p, i) for i, p in enumerate(prompts)]
        msgs = [self.messages(it, s, adversarial) for it in items]
        heads = [t.think_open] * len(msgs)
        comps: list[list[Completion]] = [[] for _ in msgs]
        traces: list[list[dict]] = [[] for _ in msgs]
        for _ in range(self.rethink_count - 1):
            outs = backend.continue_many(msgs, heads, [t.think_close], **gen)
            for i, c in enumerate(outs):
                traces[i].append(
                    {
                        "kind": "continue",
                        "prefix": heads[i],
                        "stop": [t.think_close],
                        "text": c.text,
                    }
                )
                comps[i].append(c)
                heads[i] = heads[i] + c.text.rstrip() + "\n\n" + t.rethink
        outs = backend.continue_many(msgs, heads, None, **gen)
        backend.release(msgs)
        res = []
        for i, c in enumerate(outs):
            traces[i].append({"kind": "continue", "prefix": heads[i], "stop": None, "text": c.text})
            comps[i].append(c)
            res.append(self._split(heads[i] + c.text, comps[i], traces[i], True))
        return res


class Align3(TTDMethod):
    """Three staged prefills: behavioral specs, then safety specs, then all."""

    name = "align3"

    def __init__(
        self,
        think_open: str | None = None,
        think_close: str | None = None,
        templates: Templates = DEFAULT_TEMPLATES,
    ) -> None:
        from dataclasses import replace

        if think_open is not None or think_close is not None:
            templates = replace(
                templates,
                think_open=think_open or templates.think_open,
                think_close=think_close or templates.think_close,
                align3_s1=templates.align3_s1.replace(
                    templates.think_open, think_open or templates.think_open, 1
                ),
            )
        super().__init__(templates)

    def run_batch(self, prompts, s, backend, *, adversarial=True, **gen):
        t = self.templates
        items = [as_item(p, i) for i, p in enumerate(prompts)]
        msgs = [self.messages(it, s, adversarial) for it in items]
        s1, s2, s3 = t.stages(s)
        stop = [t.think_close]
        p1 = [s1] * len(msgs)
        o1 = backend.continue_many(msgs, p1, stop, **gen)
        p2 = [p + o.text.rstrip() + "\n\n" + s2 for p, o in zip(p1, o1, strict=True)]
        o2 = backend.continue_many(msgs, p2, stop, **gen)
        p3 = [p + o.text.rstrip() + "\n\n" + s3 for p, o in zip(p2, o2, strict=True)]
        o3 = backend.continue_many(msgs, p3, None, **gen)
        backend.release(msgs)
        res = []
        for i in range(len(msgs)):
            trace = [
                {"kind": "continue", "prefix": p1[i], "stop": stop, "text": o1[i].text},
                {"kind": "continue", "prefix": p2[i], "stop": stop, "text": o2[i].text},
                {"kind": "continue", "prefix": p3[i], "stop": None, "text": o3[i].text},
            ]
            comps = [o1[i], o2[i], o3[i]]
            thought, response, found = split_thought(o3[i].text, t.think_close)
            if found:
                r = TTDResult(response, p3[i] + thought, _usage(comps, prompt_once=True), 3, trace)
            else:
                r = TTDResult(o3[i].text, "", _usage(comps, prompt_once=True), 3, trace, True)
            res.append(r)
        return res


class SelfRefine(TTDMethod):
    """Vanilla answer, then ``max_iters`` rounds of feedback + refine (Madaan et al. 2023)."""

    name = "self_refine"

    def __init__(
        self,
        max_iters: int = 3,
        max_history_length: int = 1,
        templates: Templates = DEFAULT_TEMPLATES,
    ) -> None:
        super().__init__(templates)
        if not isinstance(max_iters, int) or max_iters < 0:
            raise SpecConfigError(f"max_iters={max_iters!r} must be an int >= 0")
        if not isinstance(max_history_length, int) or max_history_length < 1:
            raise SpecConfigError(f"max_history_length={max_history_length!r} must be an int >= 1")
        self.max_iters = max_iters
        self.max_history_length = max_history_length

    def config(self):
        return {"max_iters": self.max_iters, "max_history_length": self.max_history_length}

    def history(self, pairs: list[tuple[str, str]]) -> str:
        kept = pairs[-self.max_history_length :]
        return "\n".join(
            f"<RESPONSE_{i + 1}>{r}</RESPONSE_{i + 1}><FEEDBACK_{i + 1}>{f}</FEEDBACK_{i + 1}>"
            for i, (r, f) in enumerate(kept)
        )

    def run_batch(self, prompts, s, backend, *, adversarial=True, **gen):
        t = self.templates
        items = [as_item(p, i) for i, p in enumerate(prompts)]
        base = Vanilla(t).run_batch(items, s, backend, adversarial=adversarial, **gen)
        if self.max_iters == 0:
            return base
        queries = [self.query(it, adversarial) for it in items]
        specs = t.specs_block(s)
        current = [r.response for r in base]
        pairs: list[list[tuple[str, str]]] = [[] for _ in items]
        usage = [dict(r.usage) for r in base]
        traces = [list(r.trace) for r in base]

        def add(i: int, c: Completion, kind: str, m: Messages) -> None:
            for k, v in (
                ("prompt_tokens", c.prompt_tokens),
                ("prefill_tokens", c.prefilled),
                ("completion_tokens", c.completion_tokens),
            ):
                usage[i][k] += v
            usage[i]["total_tokens"] = usage[i]["prompt_tokens"] + usage[i]["completion_tokens"]
            traces[i].append({"kind": kind, "messages": m, "text": c.text})

        for _ in range(self.max_iters):
            fb_msgs = [
                [
                    {
                        "role": "system",
                        "content": t.refine_feedback_system.format(query=q, specs=specs),
                    },
                    {"role": "user", "content": t.refine_feedback_user.format(response=r)},
                ]
                for q, r in zip(queries, current, strict=True)
            ]
            fbs = backend.chat_many(fb_msgs, **gen)
            for i, c in enumerate(fbs):
                add(i, c, "feedback", fb_msgs[i])
                pairs[i].append((current[i], split_thought(c.text, t.think_close)[1]))
            rf_msgs = [
                [
                    {"role": "system", "content": t.refine_system.format(query=q)},
                    {"role": "user", "content": t.refine_user.format(history=self.history(p))},
                ]
                for q, p in zip(queries, pairs, strict=True)
            ]
            rfs = backend.chat_many(rf_msgs, **gen)
            for i, c in enumerate(rfs):
                add(i, c, "refine", rf_msgs[i])
                current[i] = split_thought(c.text, t.think_close)[1]
        n = 1 + 2 * self.max_iters
        return [TTDResult(current[i], "", usage[i], n, traces[i]) for i in range(len(items))]


def _need_reward(name: str, reward_fn: RewardFn | None) -> RewardFn:
    if reward_fn is None:
        raise SpecConfigError(
            f"{name} needs reward_fn(item, response) -> float; there is no default, so the "
            "evaluation judge never leaks into generation unnoticed (CLI: --reward rule|judge:SPEC)"
        )
    return reward_fn


class BestOfN(TTDMethod):
    """Sample ``n`` responses to ``M``; return the one with the highest reward (reconstructed)."""

    name = "best_of_n"

    def __init__(
        self,
        n: int = 4,
        reward_fn: RewardFn | None = None,
        templates: Templates = DEFAULT_TEMPLATES,
    ) -> None:
        super().__init__(templates)
        if not isinstance(n, int) or n < 1:
            raise SpecConfigError(f"n={n!r} must be an int >= 1")
        self.n = n
        self.reward_fn = _need_reward("best_of_n", reward_fn)

    def config(self):
        return {"n": self.n}

    def run_batch(self, prompts, s, backend, *, adversarial=True, **gen):
        items = [as_item(p, i) for i, p in enumerate(prompts)]
        rep = [it for it in items for _ in range(self.n)]
        samples = Vanilla(self.templates).run_batch(rep, s, backend, adversarial=adversarial, **gen)
        res = []
        for i, it in enumerate(items):
            group = samples[i * self.n : (i + 1) * self.n]
            rewards = [self.reward_fn(it, r.response) for r in group]
            best = max(range(self.n), key=lambda j: rewards[j])
            usage = {k: sum(r.usage[k] for r in group) for k in group[0].usage}
            trace = [{**r.trace[0], "reward": w} for r, w in zip(group, rewards, strict=True)]
            res.append(
                TTDResult(
                    group[best].response,
                    group[best].thought,
                    usage,
                    self.n,
                    trace,
                    group[best].missing_think_close,
                )
            )
        return res


class TPO(TTDMethod):
    """Test-Time Preference Optimization (yafuly/TPO), reconstructed for SpecBench.

    Sample ``n_samples``; then ``max_iters`` times: textual loss (chosen vs rejected), textual
    gradient, ``n_samples`` updated responses; return the best cached response.
    Calls per prompt: ``n_samples·(max_iters+1) + 2·max_iters``.
    """

    name = "tpo"

    def __init__(
        self,
        n_samples: int = 5,
        max_iters: int = 2,
        reward_fn: RewardFn | None = None,
        templates: Templates = DEFAULT_TEMPLATES,
    ) -> None:
        super().__init__(templates)
        if not isinstance(n_samples, int) or n_samples < 1:
            raise SpecConfigError(f"n_samples={n_samples!r} must be an int >= 1")
        if not isinstance(max_iters, int) or max_iters < 0:
            raise SpecConfigError(f"max_iters={max_iters!r} must be an int >= 0")
        self.n_samples = n_samples
        self.max_iters = max_iters
        self.reward_fn = _need_reward("tpo", reward_fn)

    def config(self):
        return {"n_samples": self.n_samples, "max_iters": self.max_iters}

    def run_batch(self, prompts, s, backend, *, adversarial=True, **gen):
        t = self.templates
        items = [as_item(p, i) for i, p in enumerate(prompts)]
        n = self.n_samples
        msgs = [self.messages(it, s, adversarial) for it in items]
        queries = [m[-1]["content"] for m in msgs]
        comps: list[list[Completion]] = [[] for _ in items]
        traces: list[list[dict]] = [[] for _ in items]
        cache: list[list[tuple[float, str, str]]] = [[] for _ in items]  # (reward, resp, thought)

        def sample(batch_msgs: list[Messages], round_: int) -> None:
            flat = [m for m in batch_msgs for _ in range(n)]
            g = dict(gen)
            if g.get("seed") is not None:
                g["seed"] = g["seed"] + round_
            outs = backend.chat_many(flat, **g)
            for k, c in enumerate(outs):
                i = k // n
                thought, resp, _ = split_thought(c.text, t.think_close)
                w = self.reward_fn(items[i], resp)
                cache[i].append((w, resp, thought))
                comps[i].append(c)
                traces[i].append({"kind": "sample", "round": round_, "text": c.text, "reward": w})

        sample(msgs, 0)
        for it in range(self.max_iters):
            chosen = [max(c, key=lambda x: x[0])[1] for c in cache]
            rejected = [min(c, key=lambda x: x[0])[1] for c in cache]
            loss_msgs = [
                t.messages(t.tpo_loss.format(query=q, specs=t.specs_block(s), chosen=a, rejected=b))
                for q, a, b in zip(queries, chosen, rejected, strict=True)
            ]
            losses = backend.chat_many(loss_msgs, **gen)
            grad_msgs = [
                t.messages(t.tpo_gradient.format(loss=split_thought(c.text, t.think_close)[1]))
                for c in losses
            ]
            grads = backend.chat_many(grad_msgs, **gen)
            for i in range(len(items)):
                comps[i] += [losses[i], grads[i]]
                traces[i] += [
                    {"kind": "loss", "text": losses[i].text},
                    {"kind": "gradient", "text": grads[i].text},
                ]
            upd = [
                t.messages(
                    t.tpo_update.format(
                        query=q, chosen=a, gradient=split_thought(g.text, t.think_close)[1]
                    )
                )
                for q, a, g in zip(queries, chosen, grads, strict=True)
            ]
            sample(upd, it + 1)
        res = []
        for i in range(len(items)):
            w, resp, thought = max(cache[i], key=lambda x: x[0])
            r = TTDResult(
                resp, thought, _usage(comps[i], prompt_once=False), len(comps[i]), traces[i]
            )
            r.trace.append({"kind": "best", "reward": w})
            res.append(r)
        return res


def get_method(name: str, **cfg: Any) -> TTDMethod:
    """Build a method by name (``raw``, ``vanilla``, ``zero_think``, ``more_think``,
    ``self_refine``, ``best_of_n``, ``tpo``, ``align3``); ``cfg`` goes to its constructor."""
    classes: dict[str, type[TTDMethod]] = {
        "raw": Raw,
        "vanilla": Vanilla,
        "zero_think": ZeroThink,
        "more_think": MoreThink,
        "self_refine": SelfRefine,
        "best_of_n": BestOfN,
        "tpo": TPO,
        "align3": Align3,
    }
    if name not in classes:
        raise SpecConfigError(f"unknown method {name!r}; valid: {', '.join(METHOD_NAMES)}")
    return classes[name](**cfg)
