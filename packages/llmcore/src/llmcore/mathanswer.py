"""Grading of final math answers: ``\\boxed{}`` extraction, normalisation and equivalence.

:func:`math_equivalent` decides in three steps, cheapest first: equal strings after
:func:`normalize_math_answer` (the MATH-benchmark normaliser of Hendrycks et al. 2021, plus a
few more forms), equal numbers (integers, decimals, ``\\frac{a}{b}``, ``a/b``,
``a \\times 10^{k}``, compared exactly as fractions), and symbolic equality by `math-verify`
(sympy), which needs the ``math`` extra.

Model text is never evaluated as Python: the symbolic step runs math-verify with its LaTeX
extraction only (an ANTLR grammar that builds sympy objects; its plain-expression extraction,
which calls sympy's ``parse_expr`` and hence ``eval``, is not used), in a separate worker
process with a memory limit, killed and replaced when a comparison runs past its timeout.

Why it is in the core although no landed package grades LaTeX answers yet: three planned
packages (RL after SFT for compositional generalisation, self-verification RL, RL on physics
simulators) reward exactly this check, and a grader that each wrote on its own would differ in
the cases that decide a reward.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import math
import os
import re
import select
import subprocess
import sys
import threading
import time
from fractions import Fraction

from llmcore.errors import MissingExtraError

__all__ = ["last_boxed", "math_equivalent", "normalize_math_answer"]

#: Answers longer than this (after ``\boxed`` extraction) are never equivalent to anything
#: but an identical string: real final answers are short, and it bounds the work per call.
MAX_ANSWER_CHARS = 2_000
#: Address-space limit of the symbolic worker process (bytes).
WORKER_MEMORY_BYTES = 2 * 1024**3
#: How long the first symbolic comparison may wait for the worker to import sympy/math-verify.
WORKER_START_TIMEOUT = 120.0

# --- \boxed{} ---------------------------------------------------------------------------------

_BOXED = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")


_BRACE = re.compile(r"[{}]")


def _group_end(text: str, start: int) -> int | None:
    """Index just past the ``}`` that closes the ``{`` at ``text[start]``, or ``None``."""
    depth = 0
    for m in _BRACE.finditer(text, start):  # jumps over brace-free text in C
        depth += 1 if m.group() == "{" else -1
        if depth == 0:
            return m.end()
    return None


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) in ``text``, else ``None``.

    Braces are matched, so nested groups (``\\boxed{\\frac{1}{2}}``) are kept whole; the
    brace-less form ``\\boxed 5`` gives the token after the space. An unclosed last box
    gives ``None``.
    """
    if not isinstance(text, str):
        return None
    last = None
    for last in _BOXED.finditer(text):  # noqa: B007 - only the last match is used
        pass
    if last is None:
        return None
    i = last.end()
    if i < len(text) and text[i] == "{":
        end = _group_end(text, i)
        return None if end is None else text[i + 1 : end - 1]
    m = re.match(r"\s+([^\s$]+)", text[i:])
    return m.group(1) if m else None


# --- normalisation ----------------------------------------------------------------------------

_TEXT_CMDS = re.compile(r"\\(?:text|textbf|textit|textrm|mbox|mathrm|mathbf|operatorname)\s*\{")
_UNIT_CONTENT = re.compile(r"[A-Za-z\s^/.{}\d\\]*[A-Za-z][A-Za-z\s^/.{}\d\\]*")
_UNITS = frozenset(
    re.findall(
        r"\w+",
        """units unit cm mm km meters meter metres metre inches inch feet foot ft yards yard
        miles mile mph kph cents cent dollars dollar hours hour hrs minutes minute mins seconds
        second sec days day weeks week months month years year degrees degree sq square cubic
        grams gram kg liters liter litres litre ml people students points pounds lbs ounces oz""",
    )
)
_UNIT_TAIL = re.compile(r"(.*[\d}])((?:\s*[A-Za-z]+)+)(?:\^\{?[23]\}?)?")
_VAR_EQ = re.compile(r"[A-Za-z](?:_\{?[A-Za-z0-9]+\}?)?\s*=(?=.)")
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_INT_SLASH = re.compile(r"(-?)(\d+)/(\d+)")
_UNICODE = {
    "\u2212": "-",
    "\u00d7": "\\times ",
    "\u00b7": "\\cdot ",
    "\u03c0": "\\pi ",
    "\u221e": "\\infty ",
    "\u00b0": "^\\circ",
    "\u2264": "\\leq ",
    "\u2265": "\\geq ",
}


def _strip_text(s: str) -> str:
    """Unwrap ``\\text{X}``-like groups to ``X``; drop a trailing one after a number (a unit)."""
    out: list[str] = []
    pos = 0
    for m in _TEXT_CMDS.finditer(s):
        if m.start() < pos:
            continue  # inside a group already copied
        end = _group_end(s, m.end() - 1)
        if end is None:
            break
        content = s[m.end() : end - 1]
        # Only a last group can be a unit, so the prefix is joined at most once.
        is_unit = (
            not re.sub(r"\^\{?[23]\}?", "", s[end:]).strip()
            and _UNIT_CONTENT.fullmatch(content) is not None
            and re.search(r"[\d}]\s*$", "".join(out) + s[pos : m.start()]) is not None
        )
        out.append(s[pos : m.start()])
        if not is_unit:
            out.append(content)
        pos = len(s) if is_unit else end
    out.append(s[pos:])
    return "".join(out)


def _fix_fracs(s: str) -> str:
    """``\\frac12`` / ``\\frac1{2}`` / ``\\frac{1}2`` -> ``\\frac{1}{2}`` (brace every argument)."""
    out: list[str] = []
    i = 0
    while (j := s.find("\\frac", i)) != -1:
        k = j + len("\\frac")
        out.append(s[i:k])
        if k < len(s) and s[k].isalpha():  # \fraction? not ours
            i = k
            continue
        for _ in range(2):
            while k < len(s) and s[k] == " ":
                k += 1
            if k < len(s) and s[k] == "{":
                end = _group_end(s, k)
                if end is None:
                    break
                out.append(s[k:end])
                k = end
            elif k < len(s) and s[k].isalnum():
                out.append("{" + s[k] + "}")
                k += 1
            else:
                break
        i = k
    out.append(s[i:])
    return "".join(out)


def normalize_math_answer(text: str) -> str:
    """Canonical string form of a final math answer, for exact comparison.

    Follows the MATH normaliser (Hendrycks et al. 2021): drops ``$``, ``\\left``/``\\right``,
    ``\\!`` and other LaTeX spacing, ``\\displaystyle``, degree marks (``^\\circ``), ``\\%``,
    a trailing unit in ``\\text{...}`` (or a plain unit word such as ``cm``) after a number, a
    leading ``x =`` (one variable, one ``=``), a trailing period and spaces (except one that
    separates a command from a following letter, as in ``\\pi r``); maps ``\\dfrac``/``\\tfrac``
    to ``\\frac``, braces ``\\frac12`` and ``\\sqrt2`` arguments, unwraps ``\\text{X}`` to
    ``X``, writes ``.5`` as ``0.5``, ``a/b`` of integers as ``\\frac{a}{b}`` and
    ``1,234`` as ``1234``.
    """
    s = str(text)
    for k, v in _UNICODE.items():
        s = s.replace(k, v)
    s = s.replace("\n", " ").replace("\\!", "")
    s = re.sub(r"\\[,;: ]|\\q?quad(?![A-Za-z])|~", " ", s)
    s = re.sub(r"\\[dtc]frac(?![A-Za-z])", r"\\frac", s)
    s = re.sub(r"\\(?:left|right)(?:\.|(?![A-Za-z]))|\\displaystyle(?![A-Za-z])", "", s)
    s = re.sub(r"\\(le|ge|ne)(?![A-Za-z])", r"\\\1q", s)
    s = re.sub(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ(?![A-Za-z])", "", s)
    s = s.replace("\\$", "").replace("$", "").replace("\\%", "").replace("%", "")
    s = _strip_text(s)
    s = s.strip()
    m = _UNIT_TAIL.fullmatch(s)
    if m and all(w.lower() in _UNITS for w in m.group(2).split()):
        s = m.group(1)
    if s.count("=") == 1 and (m := _VAR_EQ.match(s)):
        s = s[m.end() :]
    # Spaces: keep one only where it ends a command before a letter (\pi r, \cdot x).
    s = re.sub(r"\s+", " ", s)
    s = re.sub(r"(\\[A-Za-z]+) (?=[A-Za-z])", "\\1\0", s).replace(" ", "").replace("\0", " ")
    s = re.sub(r"\\sqrt([0-9A-Za-z])", r"\\sqrt{\1}", s)
    s = _fix_fracs(s)
    s = s.rstrip(".")
    s = re.sub(r"(^|[{(\[,=\-])\.(\d)", r"\g<1>0.\2", s)
    if _THOUSANDS.fullmatch(s):
        s = s.replace(",", "")
    if m := _INT_SLASH.fullmatch(s):
        s = f"{m.group(1)}\\frac{{{m.group(2)}}}{{{m.group(3)}}}"
    if re.fullmatch(r"\{[^{}]*\}", s):  # a lone brace group: {5} -> 5
        s = s[1:-1]
    return s


# --- numbers ----------------------------------------------------------------------------------

_NUM = r"\d+(?:\.\d*)?|\.\d+"
_NUMBER_FORMS = (
    re.compile(rf"(?P<sign>-?)(?P<a>{_NUM})(?:[eE](?P<e>[-+]?\d{{1,3}}))?"),
    re.compile(rf"(?P<sign>-?)\\frac\{{(?P<a>{_NUM})\}}\{{(?P<b>{_NUM})\}}"),
    re.compile(rf"(?P<sign>-?)(?P<a>{_NUM})/(?P<b>{_NUM})"),
    re.compile(
        rf"(?P<sign>-?)(?P<a>{_NUM})\\(?:times|cdot)10\^(?:\{{(?P<e>[-+]?\d{{1,3}})\}}|(?P<e1>\d))"
    ),
)


def _as_number(s: str) -> Fraction | None:
    """The exact value of a normalised answer that is a plain number, else ``None``."""
    if len(s) > 200:
        return None
    for form in _NUMBER_FORMS:
        m = form.fullmatch(s)
        if m is None:
            continue
        g = m.groupdict()
        value = Fraction(g["a"])
        if g.get("b") is not None:
            den = Fraction(g["b"])
            if den == 0:
                return None
            value /= den
        exp = g.get("e") or g.get("e1")
        if exp is not None:
            value *= Fraction(10) ** int(exp)
        return -value if g["sign"] else value
    return None


# --- symbolic worker --------------------------------------------------------------------------

# Runs in a fresh interpreter (python -I -c): no llmcore or torch import, memory-limited.
# Protocol: one JSON request per stdin line, one line "1"/"0" back on a private copy of stdout
# (fd 1 itself is pointed at stderr, so library prints cannot corrupt the protocol).
_WORKER_SRC = r"""
import json, os, resource, sys
limit = int(sys.argv[1])
try:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
except (ValueError, OSError):
    pass
proto = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
sys.stdout = sys.stderr
try:
    from math_verify import LatexExtractionConfig, parse, verify
except BaseException:
    proto.write("missing\n")
    proto.flush()
    sys.exit(0)
cfg = [LatexExtractionConfig()]
proto.write("ready\n")
proto.flush()
for line in sys.stdin:
    try:
        req = json.loads(line)
        t = max(1, int(req["t"]))
        gold = parse("$" + req["g"] + "$", extraction_config=cfg, parsing_timeout=t)
        pred = parse("$" + req["p"] + "$", extraction_config=cfg, parsing_timeout=t)
        ok = bool(gold) and bool(pred) and bool(verify(gold, pred, timeout_seconds=t))
    except BaseException:
        ok = False
    proto.write("1\n" if ok else "0\n")
    proto.flush()
"""


class _SymbolicWorker:
    """One long-lived math-verify process, restarted after a timeout or a crash."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._buf = b""
        self._lock = threading.Lock()
        atexit.register(self.close)

    def close(self) -> None:
        proc, self._proc, self._buf = self._proc, None, b""
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def _readline(self, deadline: float) -> bytes | None:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                return None  # the worker died
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def _start(self) -> None:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
        cmd = [sys.executable, "-I", "-c", _WORKER_SRC, str(WORKER_MEMORY_BYTES)]
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        line = self._readline(time.monotonic() + WORKER_START_TIMEOUT)
        if line == b"ready":
            return
        self.close()
        if line == b"missing":
            raise MissingExtraError("symbolic math answer grading (math-verify)", "math")
        raise RuntimeError("the math-verify worker process did not start")

    def equivalent(self, pred: str, gold: str, timeout: float) -> bool:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self.close()
                self._start()
            assert self._proc is not None and self._proc.stdin is not None
            req = json.dumps({"p": pred, "g": gold, "t": math.ceil(timeout)}) + "\n"
            deadline = time.monotonic() + timeout
            try:
                self._proc.stdin.write(req.encode())
                self._proc.stdin.flush()
            except OSError:
                self.close()
                return False
            line = self._readline(deadline)
            if line is None:  # too slow (or crashed): kill it, a fresh one serves the next call
                self.close()
                return False
            return line == b"1"


_WORKER = _SymbolicWorker()


def _has_math_verify() -> bool:
    try:
        return importlib.util.find_spec("math_verify") is not None
    except (ImportError, ValueError):  # e.g. sys.modules["math_verify"] = None
        return False


def _answer(value: object) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float | Fraction):
        return str(value)
    if not isinstance(value, str):
        return None
    boxed = last_boxed(value)
    return value if boxed is None else boxed


def math_equivalent(pred: str, gold: str, *, timeout: float = 5.0) -> bool:
    """Whether the final answer ``pred`` equals ``gold``: as normalised strings, as numbers,
    or symbolically (math-verify, e.g. ``\\sqrt{2}/2`` vs ``\\frac{\\sqrt2}{2}``, sets, intervals).

    The last ``\\boxed{}`` of either side is used when present. Never raises on bad input
    and never evaluates it: unparsable, over-long (> :data:`MAX_ANSWER_CHARS`) or hostile
    text is simply not equivalent. The symbolic step runs in a worker process and counts as
    ``False`` after ``timeout`` seconds (the worker is then replaced); the first call that
    needs it also waits for the worker to start (a few seconds). Raises
    :class:`~llmcore.errors.MissingExtraError` only when that step is needed and
    math-verify is not installed.
    """
    try:
        p, g = _answer(pred), _answer(gold)
        if p is None or g is None:
            return False
        if len(p) > MAX_ANSWER_CHARS or len(g) > MAX_ANSWER_CHARS:
            return p == g and p.strip() != ""
        np_, ng = normalize_math_answer(p), normalize_math_answer(g)
        if not np_ or not ng:
            return False
        if np_ == ng:
            return True
        a, b = _as_number(np_), _as_number(ng)
        if a is not None and b is not None:
            return a == b
    except Exception:
        return False
    if not _has_math_verify():
        raise MissingExtraError("symbolic math answer grading (math-verify)", "math")
    try:
        return _WORKER.equivalent(np_, ng, max(float(timeout), 0.01))
    except MissingExtraError:
        raise
    except Exception:
        return False
