"""Per-module 3-bit analysis modes and coalition masks (paper Sec. 3, "feedback components").

Each feedback module has a mode made of three bits: ``ENABLE=1`` (the tool runs), ``FORMAT=2``
(its output is rendered into the prompt) and ``SUMMARY=4`` (an LLM summarises it). The valid
modes are ``MODE_NONE=0`` (absent), ``MODE_RAW=3`` (rendered tool output) and ``MODE_FULL=7``
(rendered output plus LLM summary). A mask string reads ``p{plan}-d{debug}-a{anlz}-p{perf}``,
optionally followed by ``-r{reference}`` for the reference-code player (our extension).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from cuda_analyst.errors import AnalystValueError

ENABLE, FORMAT, SUMMARY = 1, 2, 4
MODE_NONE, MODE_RAW, MODE_FULL = 0, ENABLE | FORMAT, ENABLE | FORMAT | SUMMARY
VALID_MODES = (MODE_NONE, ENABLE, MODE_RAW, MODE_FULL)
#: Players of the coalition game, in mask order (``r`` is our reference-code extension).
PLAYERS = ("d", "a", "p", "r")
_MASK_RE = re.compile(r"^p(\d)-d(\d)-a(\d)-p(\d)(?:-r(\d))?$")


def check_mode(name: str, mode: int) -> int:
    """Validate one module's mode bits (0, 1, 3 or 7; FORMAT needs ENABLE, SUMMARY needs FORMAT)."""
    if not isinstance(mode, int) or isinstance(mode, bool) or mode not in VALID_MODES:
        raise AnalystValueError(
            f"invalid mode bits {mode!r} for {name!r}: use 0 (none), 1 (enable only), "
            f"3 (raw: enable+format) or 7 (full: enable+format+summary)"
        )
    return mode


@dataclass(frozen=True)
class AnalysisMask:
    """Modes of the planner and the debug/analyzer/profiler/reference players."""

    plan: int = MODE_FULL
    """Planner mode (7: the LLM writes a roadmap from the reports; 3: reports only; 0: no block)."""
    d: int = MODE_NONE
    """Debugger (error, compile log, correctness, lint): runs when the parent failed."""
    a: int = MODE_NONE
    """Static analyzer (functions, parameters, loop nests): runs when the parent passed."""
    p: int = MODE_NONE
    """Profiler (timings, per-kernel speedup): runs when the parent passed."""
    r: int = MODE_NONE
    """Reference code player (our extension): the task's reference implementation."""

    def __post_init__(self) -> None:
        for name in ("plan", "d", "a", "p", "r"):
            check_mode(name, getattr(self, name))

    def __str__(self) -> str:
        s = f"p{self.plan}-d{self.d}-a{self.a}-p{self.p}"
        return s + (f"-r{self.r}" if self.r else "")

    @classmethod
    def parse(cls, text: str) -> AnalysisMask:
        """Inverse of ``str()``: ``"p7-d3-a3-p3"`` (optionally ``"-r3"``)."""
        m = _MASK_RE.match(text.strip()) if isinstance(text, str) else None
        if m is None:
            raise AnalystValueError(
                f"malformed mask {text!r}: expected 'p{{plan}}-d{{debug}}-a{{anlz}}-p{{perf}}' "
                f"with mode digits, e.g. 'p7-d3-a3-p3' (optional '-r3')"
            )
        plan, d, a, p, r = (int(g) if g is not None else 0 for g in m.groups())
        return cls(plan=plan, d=d, a=a, p=p, r=r)

    def players(self) -> frozenset[str]:
        """The coalition: players whose mode is not ``MODE_NONE``."""
        return frozenset(x for x in PLAYERS if getattr(self, x))


def check_players(players: Sequence[str]) -> tuple[str, ...]:
    """Validate player names (``d``, ``a``, ``p``, ``r``), unique, non-empty."""
    players = tuple(players)
    bad = [x for x in players if x not in PLAYERS]
    if bad or not players or len(set(players)) != len(players):
        raise AnalystValueError(
            f"invalid players {list(players)!r}: choose distinct names among {list(PLAYERS)}"
        )
    return players


def coalition_mask(
    coalition: Sequence[str] | frozenset[str], *, plan: int = MODE_FULL, mode: int = MODE_RAW
) -> AnalysisMask:
    """The mask where ``coalition``'s players are at ``mode`` and the others absent."""
    check_players(tuple(coalition) or ("d",))
    return AnalysisMask(plan=plan, **{x: mode for x in coalition})


def coalition_masks(
    players: Sequence[str] = ("d", "a", "p"), *, plan: int = MODE_FULL, mode: int = MODE_RAW
) -> list[AnalysisMask]:
    """All ``2^n`` coalition masks (``p7-d{0|3}-a{0|3}-p{0|3}`` for the default players)."""
    players = check_players(players)
    out = []
    for bits in itertools.product((0, 1), repeat=len(players)):
        out.append(
            coalition_mask(
                [x for x, b in zip(players, bits, strict=True) if b], plan=plan, mode=mode
            )
        )
    return out


def parse_masks(spec: str, players: Sequence[str] = ("d", "a", "p")) -> list[AnalysisMask]:
    """``"all8"`` / ``"all"`` (every coalition of ``players``) or comma-separated mask strings."""
    if spec in ("all", "all8"):
        return coalition_masks(players)
    return [AnalysisMask.parse(s) for s in spec.split(",") if s.strip()]
