"""Feedback components (the paper's players) and the per-mask context build (Sec. 3).

Each component has a ``name``, the player it belongs to (``d`` debugger, ``a`` analyzer, ``p``
profiler, ``r`` reference), ``when`` it runs (``fail``, ``pass`` or ``both``), ``run(ctx)``
producing raw data and ``render(raw)`` producing text. On CPU the debugger is the compiler log
and the correctness check, the analyzer a static parse of functions, parameters and loop nests,
the profiler the measured candidate/baseline timings. Every rendered report names the program
it was computed on (``program sha256 ...``), so misaligned feedback is detectable.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cuda_analyst.backends import compiler_messages
from cuda_analyst.evaluator import Result
from cuda_analyst.masks import MODE_FULL, AnalysisMask, check_players
from cuda_analyst.prompting import PLACEBO_PLAN, Report
from cuda_analyst.tasks import Task


def code_sha(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()[:12]


@dataclass
class Context:
    """What a component sees: the task, the analysed program and its evaluation."""

    task: Task
    code: str
    result: Result


class FeedbackComponent:
    """Base class: ``run`` gathers raw data, ``render`` formats it."""

    name = "component"
    player = "d"
    when = "both"

    def applies(self, result: Result) -> bool:
        return self.when == "both" or (self.when == "pass") == result.passed

    def run(self, ctx: Context) -> Any:
        raise NotImplementedError

    def render(self, raw: Any) -> str:
        return json.dumps(raw, indent=1, default=str)


class ErrorFeedback(FeedbackComponent):
    """The evaluator's error JSON (``ErrorPhase``), included whenever the program failed."""

    name, player, when = "ErrorPhase", "", "fail"

    def run(self, ctx: Context) -> Any:
        return ctx.result.error or {}

    def render(self, raw: Any) -> str:
        return "Evaluation error: " + json.dumps({k: v for k, v in raw.items() if k != "stderr"})


class CompileLogFeedback(FeedbackComponent):
    """Compiler diagnostics with line numbers (debugger)."""

    name, player, when = "CompileLog", "d", "fail"

    def run(self, ctx: Context) -> Any:
        return {
            "messages": compiler_messages(ctx.result.compile_log),
            "log": ctx.result.compile_log[-1500:],
        }

    def render(self, raw: Any) -> str:
        if not raw["messages"]:
            return "The program compiled without diagnostics."
        return "Compiler diagnostics:\n" + "\n".join(
            f"- line {m['line']}:{m['col']} {m['kind']}: {m['message']}" for m in raw["messages"]
        )


class CorrectnessFeedback(FeedbackComponent):
    """Failing seed, max/mean abs difference or run failure reason (debugger)."""

    name, player, when = "Correctness", "d", "fail"

    def run(self, ctx: Context) -> Any:
        return ctx.result.check or {}

    def render(self, raw: Any) -> str:
        if not raw:
            return "No correctness check ran (the build failed)."
        return (
            f"Correctness check: reason={raw.get('reason') or 'ok'}, failing_seed={raw.get('failing_seed')}, "
            f"max_abs_diff={raw.get('max_abs')}, mean_abs_diff={raw.get('mean_abs')}"
        )


_FUNC = re.compile(
    r"(?:static\s+|inline\s+)*([A-Za-z_][\w\s\*]*?)\s+\**([A-Za-z_]\w*)\s*\(([^;{}]*)\)\s*\{"
)
_LOOP = re.compile(r"\b(for|while)\s*\(")


class StaticLoopFeedback(FeedbackComponent):
    """Functions, parameters (type, pointer level, qualifiers) and loop nests (analyzer)."""

    name, player, when = "StaticAnalysis", "a", "pass"

    def run(self, ctx: Context) -> Any:
        return analyse_c(ctx.code)

    def render(self, raw: Any) -> str:
        lines = []
        for f in raw["functions"]:
            ps = ", ".join(
                f"{p['name']}: {p['type']}{'*' * p['pointer']}{' const' if p['const'] else ''}{' restrict' if p['restrict'] else ''}"
                for p in f["params"]
            )
            lines.append(f"- function `{f['name']}` returns {f['returns']} ({ps})")
        for lp in raw["loops"]:
            pragma = f" pragma `{lp['pragma']}`" if lp["pragma"] else ""
            lines.append(f"  - line {lp['line']}: {lp['kind']} loop at depth {lp['depth']}{pragma}")
        lines.append(f"- max loop depth {raw['max_depth']}")
        return "Structure:\n" + "\n".join(lines)


def analyse_c(code: str) -> dict[str, Any]:
    """A light C parser: function headers and loop nesting depth by brace/paren matching."""
    funcs = []
    for m in _FUNC.finditer(code):
        params = []
        for part in [p.strip() for p in m.group(3).split(",") if p.strip() and p.strip() != "void"]:
            toks = part.replace("*", " * ").split()
            params.append({
                "name": toks[-1] if toks else part,
                "type": " ".join(t for t in toks[:-1] if t not in ("*", "const", "restrict", "__restrict__")),
                "pointer": toks.count("*"),
                "const": "const" in toks,
                "restrict": "restrict" in toks or "__restrict__" in toks,
            })  # fmt: skip
        funcs.append({"name": m.group(2), "returns": m.group(1).strip(), "params": params})
    loops, depth_stack, brace = [], [], 0
    lines = code.splitlines()
    pending_pragma = ""
    for ln, line in enumerate(lines, 1):
        s = line.strip()
        if s.startswith("#pragma"):
            pending_pragma = s
            continue
        for m in _LOOP.finditer(line):
            while depth_stack and depth_stack[-1] > brace:
                depth_stack.pop()
            depth = len([d for d in depth_stack if d <= brace]) + 1
            loops.append({"line": ln, "kind": m.group(1), "depth": depth, "pragma": pending_pragma})
            pending_pragma = ""
            depth_stack.append(brace)
        brace += line.count("{") - line.count("}")
        if not _LOOP.search(line) and s.endswith(";"):
            # an unbraced loop body ends at its statement
            while depth_stack and depth_stack[-1] >= brace and "{" not in line:
                depth_stack.pop()
    return {
        "functions": funcs,
        "loops": loops,
        "max_depth": max((lp["depth"] for lp in loops), default=0),
    }


class ProfileFeedback(FeedbackComponent):
    """Measured candidate and baseline times, speedup and memory bound (profiler; CPU)."""

    name, player, when = "Profile", "p", "pass"

    def run(self, ctx: Context) -> Any:
        return dict(ctx.result.timing, backend=ctx.result.backend, suspicious=ctx.result.suspicious)

    def render(self, raw: Any) -> str:
        return (
            f"Timing on backend {raw.get('backend')} (CPU stand-in): candidate min {raw.get('cand_min')} ns, "
            f"median {raw.get('cand_median')} ns; baseline min {raw.get('base_min')} ns; "
            f"speedup {raw.get('speedup')}; copy bandwidth {raw.get('copy_bytes_per_s')} B/s"
            + (f"; suspicious: {raw['suspicious']}" if raw.get("suspicious") else "")
        )


class ReferenceFeedback(FeedbackComponent):
    """The task's reference implementation and naive baseline (our ``r`` player)."""

    name, player, when = "Reference", "r", "both"

    def run(self, ctx: Context) -> Any:
        return {"reference": ctx.task.reference_src, "baseline": ctx.task.baseline_src}

    def render(self, raw: Any) -> str:
        return (
            f"Reference (NumPy, float64):\n{raw['reference']}\nNaive baseline:\n{raw['baseline']}"
        )


DEFAULT_COMPONENTS: tuple[FeedbackComponent, ...] = (
    CompileLogFeedback(), CorrectnessFeedback(), StaticLoopFeedback(), ProfileFeedback(), ReferenceFeedback(),
)  # fmt: skip
PLAYER_NAMES = {"d": "Debugger", "a": "Analyzer", "p": "Profiler", "r": "Reference"}
SUMMARY_ROLES = {
    "d": "You are a compiler and runtime-error expert. Summarise the findings below into fixes.",
    "a": "You are a loop-nest (polyhedral) analysis expert. Summarise the structure below into optimisation opportunities.",
    "p": "You are a performance-profiling expert. Summarise the timings below into bottlenecks.",
    "r": "You are a kernel engineer. Summarise what the reference computes and its pitfalls.",
}
SUMMARY_MARK = "[feedback-summary request]"
PLAN_MARK = "[planning request]"


def _summarise(llm: Any, prompts: list[str], seed: int) -> list[str]:
    from llmcore.generation import SamplingParams

    outs = llm.generate(
        prompts, SamplingParams(n=1, temperature=0.0, max_new_tokens=256, seed=seed)
    )
    return [o[0].text.strip() for o in outs]


def build_reports(
    task: Task,
    code: str,
    result: Result,
    mask: AnalysisMask,
    *,
    llm: Any = None,
    components: Sequence[FeedbackComponent] = DEFAULT_COMPONENTS,
    seed: int = 0,
    placebo: bool = False,
) -> list[Report]:
    """Reports for one parent under ``mask``: ``[Planner?, ErrorPhase?, player reports...]``.

    Player ``x`` contributes when ``mask.x`` is on and its components apply to the result; in
    ``MODE_FULL`` its text is summarised by ``llm``. ``mask.plan == 7`` adds the planner's
    roadmap (``placebo`` replaces it with the content-free plan); ``plan == 0`` gives no block."""
    if mask.plan == 0:
        return []
    head = f"(program sha256 {code_sha(code)})"
    ctx = Context(task, code, result)
    reports: list[Report] = []
    if not result.passed:
        err = ErrorFeedback()
        reports.append(Report("ErrorPhase", f"{head} {err.render(err.run(ctx))}"))
    to_summarise = []
    for x in ("d", "a", "p", "r"):
        mode = getattr(mask, x)
        if not mode:
            continue
        texts = [c.render(c.run(ctx)) for c in components if c.player == x and c.applies(result)]
        if not texts:
            continue
        rep = Report(PLAYER_NAMES[x], f"{head}\n" + "\n".join(texts))
        reports.append(rep)
        if mode == MODE_FULL:
            to_summarise.append((x, rep))
    if to_summarise:
        if llm is None:
            raise ValueError("MODE_FULL summaries need an llm")
        prompts = [f"{SUMMARY_MARK}\n{SUMMARY_ROLES[x]}\n\n{r.raw}" for x, r in to_summarise]
        for (_, rep), text in zip(to_summarise, _summarise(llm, prompts, seed), strict=True):
            rep.summary = f"{head} {text}"
    if mask.plan == MODE_FULL:
        if placebo:
            plan = PLACEBO_PLAN
        else:
            if llm is None:
                raise ValueError("the planner (plan=7) needs an llm")
            ctxt = (
                "\n\n".join(f"### {r.name}\n{r.decision_text()}" for r in reports)
                or "(no feedback)"
            )
            prompt = (
                f"{PLAN_MARK}\nYou are a planning expert for GPU kernels. From the context blocks below write a "
                "roadmap: executive summary; findings grouped BLOCKER / BOTTLENECK / TECHNICAL DEBT; a 3-step plan "
                "(correctness, efficiency, fine-tuning); expected impact; feasibility conflicts.\n\n"
                + ctxt
            )
            plan = _summarise(llm, [prompt], seed)[0]
        reports.insert(0, Report("Planner", "", plan))
    return reports


__all__ = [
    "CompileLogFeedback", "Context", "CorrectnessFeedback", "ErrorFeedback", "FeedbackComponent",
    "ProfileFeedback", "ReferenceFeedback", "StaticLoopFeedback", "analyse_c", "build_reports",
    "check_players", "code_sha",
]  # fmt: skip
