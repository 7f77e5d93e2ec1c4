"""Programs of the Hierarchical Latent Selection Model: execution, sampling, prompts, traces.

A program is a cascade of latent selections ``S_l = (R_l, K_l)`` (routing, skill[, parameter]);
``h_l = rho_{R_l}(h_0..h_{l-1}; k_{K_l})`` and the answer is ``y = h_L``. The observed trace
renders one line ``h<l>=<value>`` per step, then ``ans=<value>``. The signature
``sigma(P) = ((R_1, K_1), ..., (R_L, K_L))`` ignores inputs and parameters.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from compgen_rl.errors import CompgenError, UnknownModuleError
from compgen_rl.modules import ROUTINGS, SKILLS, Inventory, get_inventory

__all__ = [
    "ParsedTrace",
    "Program",
    "Trace",
    "execute",
    "extract_answer",
    "parse_completion",
    "parse_signature",
    "render_prompt",
    "render_trace",
    "sample_program",
]

Step = tuple[Any, ...]


@dataclass(frozen=True)
class Program:
    """``steps[l-1] = (routing, skill)`` or ``(routing, skill, param)`` by module name."""

    steps: tuple[Step, ...]
    inventory: str = "tiny"

    def __post_init__(self) -> None:
        steps = tuple(tuple(s) for s in self.steps)
        object.__setattr__(self, "steps", steps)
        if not steps:
            raise CompgenError("a program needs depth >= 1 (got no steps)")
        for i, st in enumerate(steps, start=1):
            if len(st) not in (2, 3):
                raise CompgenError(
                    f"step {i} {st!r} must be (routing, skill) or (routing, skill, param)"
                )
            r, k = st[0], st[1]
            if r not in ROUTINGS:
                raise UnknownModuleError(
                    f"step {i}: unknown routing {r!r}; known: {sorted(ROUTINGS)}"
                )
            if k not in SKILLS:
                raise UnknownModuleError(f"step {i}: unknown skill {k!r}; known: {sorted(SKILLS)}")
            if ROUTINGS[r].min_step > i:
                raise CompgenError(
                    f"step {i}: routing {r!r} reads h_(l-{ROUTINGS[r].min_step}) and is invalid before "
                    f"step {ROUTINGS[r].min_step}; use chain/recall at step {i}"
                )
            needs = SKILLS[k].params is not None
            if needs != (len(st) == 3):
                raise CompgenError(
                    f"step {i}: skill {k!r} {'needs' if needs else 'takes no'} parameter, got {st!r}"
                )

    @property
    def depth(self) -> int:
        return len(self.steps)

    @property
    def signature(self) -> str:
        """``"chain.rev|splice.sort"``: routing.skill per step (parameters ignored)."""
        return "|".join(f"{s[0]}.{s[1]}" for s in self.steps)

    @property
    def modules(self) -> list[str]:
        """Distinct modules used, in order of first use."""
        out: list[str] = []
        for s in self.steps:
            for m in (s[1], s[0]):
                if m not in out:
                    out.append(m)
        return out

    def events(self) -> list[str]:
        """Local events ``skill@l/routing`` (module, step position, routing context)."""
        return [f"{s[1]}@{i}/{s[0]}" for i, s in enumerate(self.steps, start=1)]

    def to_json(self) -> str:
        return json.dumps(
            {"inventory": self.inventory, "steps": [list(s) for s in self.steps]},
            sort_keys=True,
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> Program:
        try:
            d = json.loads(text)
            return cls(tuple(tuple(s) for s in d["steps"]), d.get("inventory", "tiny"))
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise CompgenError(f"not a program JSON ({e}): {text[:80]!r}") from e

    @classmethod
    def from_signature(cls, signature: str, inventory: str = "tiny") -> Program:
        """A parameter-free program from ``"chain.rev|splice.sort"``."""
        return cls(parse_signature(signature), inventory)


def parse_signature(signature: str) -> tuple[tuple[str, str], ...]:
    """``"chain.rev|splice.sort"`` -> ``(("chain", "rev"), ("splice", "sort"))``."""
    out = []
    for part in signature.split("|"):
        r, sep, k = part.partition(".")
        if not sep:
            raise CompgenError(f"signature part {part!r} is not routing.skill (in {signature!r})")
        out.append((r, k))
    return tuple(out)


@dataclass(frozen=True)
class Trace:
    """Executed program: ``hidden = [h_1, ..., h_L]`` (``h_0`` is the input), ``answer = h_L``."""

    x: str
    hidden: list[str]
    answer: str


def execute(program: Program, x: str, *, max_len: int | None = None) -> Trace:
    """Run ``program`` on ``x``: ``h_l = rho_R(h_<l; k_K)``. Results longer than ``max_len``
    (default: the program inventory's) raise :class:`CompgenError`; nothing is truncated."""
    if max_len is None:
        max_len = get_inventory(program.inventory).max_len
    hist = [x]
    for i, st in enumerate(program.steps, start=1):
        skill = SKILLS[st[1]]
        param = st[2] if len(st) == 3 else None
        h = ROUTINGS[st[0]].fn(hist, lambda s, _k=skill, _p=param: _k(s, _p))
        if len(h) > max_len:
            raise CompgenError(
                f"step {i} ({st[0]}.{st[1]}) produced {len(h)} characters > max_len={max_len} "
                f"(input {x!r}); shorten inputs, raise max_len or resample the program"
            )
        hist.append(h)
    return Trace(x, hist[1:], hist[-1])


def sample_program(
    rng: random.Random,
    inventory: Inventory | str,
    depth: int,
    allowed: Callable[[Program], bool] | None = None,
    *,
    max_tries: int = 1000,
) -> Program:
    """Sample a valid depth-``depth`` program uniformly over (routing valid at l, skill) per step,
    with parameters drawn from each skill's sampler; ``allowed`` filters programs."""
    inv = get_inventory(inventory)
    if depth < 1:
        raise CompgenError(f"depth must be >= 1, got {depth}")
    for _ in range(max_tries):
        steps: list[Step] = []
        for i in range(1, depth + 1):
            r = rng.choice(inv.routings_at(i))
            k = rng.choice(inv.skills)
            sampler = SKILLS[k].params
            steps.append((r, k) if sampler is None else (r, k, sampler(rng)))
        p = Program(tuple(steps), inv.name)
        if allowed is None or allowed(p):
            return p
    raise CompgenError(f"no allowed depth-{depth} program in {max_tries} samples from {inv.name!r}")


def program_codes(program: Program, inventory: Inventory | None = None) -> str:
    """The program as opaque codes ``r<i>.k<j>`` (``r<i>.k<j>(param)`` with a parameter)."""
    inv = inventory or get_inventory(program.inventory)
    parts = []
    for st in program.steps:
        code = f"{inv.routing_code(st[0])}.{inv.skill_code(st[1])}"
        parts.append(code if len(st) == 2 else f"{code}({st[2]})")
    return " ".join(parts)


_CHAT_INSTRUCTION = (
    "Apply the program to the input step by step. Each code r<i>.k<j> picks a routing r<i> "
    "(which earlier results the step reads) and a skill k<j> (the string operation). Write each "
    "intermediate result on its own line as h<step>=<value>, then the final result as ans=<value>."
)


def render_prompt(
    program: Program,
    x: str,
    style: Literal["plain", "chat"] = "plain",
    *,
    inventory: Inventory | None = None,
) -> str:
    """The prompt: input and opaque program codes. ``plain`` is ``"x=<x> p=<codes>\\n"``
    (the newline opens the completion); ``chat`` is a user message for instruct models."""
    codes = program_codes(program, inventory)
    if style == "plain":
        return f"x={x} p={codes}\n"
    if style == "chat":
        return f"Input: {x}\nProgram: {codes}\n{_CHAT_INSTRUCTION}"
    raise CompgenError(f"style must be 'plain' or 'chat', got {style!r}")


def render_trace(trace: Trace) -> str:
    """Canonical completion: ``h<l>=<value>`` per step, then ``ans=<value>``, newline-ended."""
    lines = [f"h{i}={h}" for i, h in enumerate(trace.hidden, start=1)]
    return "\n".join([*lines, f"ans={trace.answer}"]) + "\n"


@dataclass(frozen=True)
class ParsedTrace:
    """What a completion says: ``steps[l-1]`` = its ``h<l>`` value (``None`` if absent up to the
    last step it wrote), ``answer`` = its final answer (``None`` when there is no answer)."""

    steps: list[str | None] = field(default_factory=list)
    answer: str | None = None


_STEP = re.compile(r"^h(\d{1,3})=(.*)$")
_JSON_OUT = re.compile(r"\{[^{}]*\"output\"\s*:[^{}]*\}")


def parse_completion(text: Any) -> ParsedTrace:
    """Parse a completion into its step values and answer; never raises.

    The answer is the last ``ans=`` line (trailing whitespace dropped); without one, the
    ``"output"`` of the last JSON object that has it (the prior work's format)."""
    try:
        if not isinstance(text, str):
            text = completion_text(text)
        found: dict[int, str] = {}
        answer = None
        for raw in text.splitlines():
            line = raw.rstrip()
            if line.startswith("ans="):
                answer = line[4:]
                continue
            m = _STEP.match(line)
            if m and int(m.group(1)) >= 1 and int(m.group(1)) not in found:
                found[int(m.group(1))] = m.group(2)
        if answer is None:
            for blob in reversed(_JSON_OUT.findall(text)):
                try:
                    val = json.loads(blob).get("output")
                except (json.JSONDecodeError, AttributeError):
                    continue
                if val is not None:
                    answer = str(val)
                    break
        steps = [found.get(i) for i in range(1, max(found, default=0) + 1)]
        return ParsedTrace(steps, answer)
    except Exception:  # garbage of any kind parses to nothing
        return ParsedTrace([], None)


def completion_text(completion: Any) -> str:
    """Text of a trl completion: a string, or conversational ``[{"role", "content"}, ...]``."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list | tuple):
        return "".join(
            str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in completion
        )
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    return "" if completion is None else str(completion)


def extract_answer(text: Any) -> str | None:
    """The final answer of a completion (see :func:`parse_completion`), or ``None``."""
    return parse_completion(text).answer


def parse_prompt_input(prompt: str) -> str | None:
    """The input string of a plain or chat prompt (``x=...`` / ``Input: ...``), or ``None``."""
    m = re.search(r"(?:^|\s|>)x=(\S*) p=", prompt) or re.search(r"Input: (.*)\n", prompt)
    return m.group(1) if m else None
