"""Binary answer-checking reward for numeric, reverse and symbolic physics answers.

The paper's rule (Sec. 3.5): take the last ``\\boxed{}`` (else the whole response), read a
number, and compare magnitudes: within an absolute ``rel`` when either side is at most ``thr``
(0.01), else within a relative ``rel`` (5 % in training). Symbolic answers are evaluated after
substituting the question's symbol -> value mapping (angles converted from degrees), then
checked with the same rule. Nothing here evaluates model text as Python: numbers are read by a
small LaTeX arithmetic reader, and ``llmcore.metrics.math_equivalent`` (math-verify in a
sandboxed worker) is the fallback when that reader cannot parse the answer.

``eval_reward`` applies the same rule at 1 %: the official validation path instead hands the
boxed answer to math-verify's own comparison, so scores can differ at the margin.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from llmcore.metrics import extract_number, last_boxed

__all__ = [
    "check_answer",
    "eval_reward",
    "extract_last_boxed",
    "latex_value",
    "numeric_match",
    "sim2reason_reward",
    "substitute",
    "symbolic_match",
    "to_float",
]

G = 9.81
_MAX_CHARS = 2000


def extract_last_boxed(text: str) -> str:
    """Content of the last ``\\boxed{...}`` (braces matched), else the whole text."""
    box = last_boxed(text)
    return text if box is None else box


_CLEAN = [
    (re.compile(r"\\(?:left|right|displaystyle)"), ""),
    (re.compile(r"\\[,;:! ]|~|\$"), " "),
    (re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\%|°"), ""),
    (re.compile(r"\\[dt]frac"), r"\\frac"),
    (re.compile(r"\\(?:text|mathrm|mbox|operatorname|textrm)\s*\{[^{}]*\}(?:\^\{?-?\d+\}?)?"), " "),
    (re.compile(r"(?<=\d),(?=\d{3}\b)"), ""),
    (re.compile(r"−"), "-"),
]
_NUM = r"[+-]?\s*(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
_LEAD = re.compile(
    rf"^\s*(?P<sign>[+-]?)\s*(?:\\frac\s*\{{\s*(?P<fn>{_NUM})\s*\}}\s*\{{\s*(?P<fd>{_NUM})\s*\}}"
    rf"|(?P<m>{_NUM})\s*(?:(?:\\times|\\cdot|\*|x)\s*10\s*\^\s*\{{?\s*(?P<e>[+-]?\d+)\s*\}}?)?"
    rf"(?:\s*/\s*(?P<d>{_NUM})(?![\d.]))?)"
)
_UNIT_TAIL = re.compile(r"^[\sA-Za-z/\^\-\d{}().*\\]*$")


def _clean(text: str) -> str:
    for pat, rep in _CLEAN:
        text = pat.sub(rep, text)
    return text.strip()


def _lead_number(s: str) -> float | None:
    m = _LEAD.match(s)
    if not m:
        return None
    rest = s[m.end() :].strip()
    if rest and (not _UNIT_TAIL.match(rest) or not re.match(r"^[A-Za-z\\]", rest)):
        return None
    sign = -1.0 if m.group("sign") == "-" else 1.0
    try:
        if m.group("fn") is not None:
            den = float(m.group("fd").replace(" ", ""))
            return None if den == 0 else sign * float(m.group("fn").replace(" ", "")) / den
        v = float(m.group("m").replace(" ", ""))
        if m.group("e") is not None:
            v *= 10.0 ** int(m.group("e"))
        if m.group("d") is not None:
            den = float(m.group("d").replace(" ", ""))
            if den == 0:
                return None
            v /= den
        return sign * v
    except (ValueError, OverflowError):
        return None


def to_float(text: str, *, math_verify: bool = False) -> float | None:
    """Read one number from an answer: plain, scientific (``1e3``, ``1.2 \\times 10^{3}``),
    ``\\frac{a}{b}``, ``a/b``, with trailing units and a leading ``x =`` dropped.

    Falls back to a small LaTeX arithmetic reader (``\\sqrt``, products, powers), then, with
    ``math_verify=True``, to nothing else (math-verify compares, it does not return numbers).
    ``None`` when no finite number can be read.
    """
    if not isinstance(text, str) or not text.strip() or len(text) > _MAX_CHARS:
        return None
    s = _clean(text)
    if "=" in s:
        s = s.rsplit("=", 1)[1].strip()
    v = _lead_number(s)
    if v is None:
        v = latex_value(_strip_units(s))
    if v is None or not math.isfinite(v):
        return None
    return v


def _strip_units(s: str) -> str:
    return re.sub(r"\s+(?:[A-Za-z]{1,3}(?:\s*/\s*[A-Za-z]{1,3})*(?:\^\{?-?\d\}?)?\s*)+$", "", s)


# -- a tiny, safe LaTeX arithmetic reader ---------------------------------------------------
_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+)|(?P<cmd>\\[A-Za-z]+)|(?P<op>[-+*/^(){}\[\]]))"
)
_FUNCS = {"sin": math.sin, "cos": math.cos, "tan": math.tan, "ln": math.log, "log": math.log10,
          "exp": math.exp, "arcsin": math.asin, "arccos": math.acos, "arctan": math.atan}  # fmt: skip


class _Reader:
    """Recursive-descent evaluator over numbers, + - * / ^, \\frac, \\sqrt, trig, \\pi."""

    def __init__(self, text: str) -> None:
        self.toks: list[tuple[str, str]] = []
        pos = 0
        text = text.replace("\\cdot", "*").replace("\\times", "*")
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise ValueError(f"cannot read {text[pos : pos + 10]!r}")
            kind = m.lastgroup or ""
            self.toks.append((kind, m.group(kind)))
            pos = m.end()
        self.i = 0

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            raise ValueError(f"expected {value!r}, got {tok!r}")
        self.i += 1
        return tok

    def expr(self) -> float:
        v = self.term()
        while (tok := self.peek()) and tok[1] in "+-":
            self.take()
            v = v + self.term() if tok[1] == "+" else v - self.term()
        return v

    def term(self) -> float:
        v = self.factor()
        while (tok := self.peek()) is not None:
            if tok[1] in "*/":
                self.take()
                v = v * self.factor() if tok[1] == "*" else v / self.factor()
            elif tok[0] in ("num", "cmd") or tok[1] in "({":
                v = v * self.factor()  # implicit multiplication
            else:
                break
        return v

    def factor(self) -> float:
        tok = self.peek()
        if tok and tok[1] in "+-":
            self.take()
            v = self.factor()
            return -v if tok[1] == "-" else v
        base = self.atom()
        if (tok := self.peek()) and tok[1] == "^":
            self.take()
            return base ** self.factor()
        return base

    def group(self) -> float:
        tok = self.take()
        close = {"(": ")", "{": "}", "[": "]"}.get(tok[1])
        if close is None:
            raise ValueError(f"expected a group, got {tok!r}")
        v = self.expr()
        self.take(close)
        return v

    def atom(self) -> float:
        tok = self.peek()
        if tok is None:
            raise ValueError("unexpected end")
        kind, val = tok
        if kind == "num":
            self.take()
            return float(val)
        if val in "({[":
            return self.group()
        if kind == "cmd":
            self.take()
            name = val[1:]
            if name == "frac":
                return self.group() / self.group()
            if name == "sqrt":
                if (t := self.peek()) and t[1] == "[":
                    n = self.group()
                    return self.group() ** (1.0 / n)
                return math.sqrt(self.atom_or_group())
            if name == "pi":
                return math.pi
            if name in _FUNCS:
                power = 1.0
                if (t := self.peek()) and t[1] == "^":  # \sin^{2}{x} = (\sin x)^2
                    self.take()
                    power = self.atom_or_group()
                return _FUNCS[name](self.factor()) ** power
        raise ValueError(f"unknown token {val!r}")

    def atom_or_group(self) -> float:
        tok = self.peek()
        return self.group() if tok and tok[1] in "({[" else self.atom()


def latex_value(text: str) -> float | None:
    """Value of a numeric LaTeX expression (no symbols), or ``None`` if it is not one."""
    if not isinstance(text, str) or not text.strip() or len(text) > _MAX_CHARS:
        return None
    try:
        r = _Reader(_clean(text))
        v = r.expr()
        if r.peek() is not None:
            return None
        v = float(v)
    except (ValueError, ZeroDivisionError, OverflowError, TypeError):
        return None
    return v if math.isfinite(v) else None


def numeric_match(pred: float | None, gt: float, rel: float = 0.05, thr: float = 0.01) -> bool:
    """The paper's magnitude rule: absolute ``rel`` if ``|gt| <= thr`` or ``|pred| <= thr``,
    else relative ``rel``; signs are ignored (questions ask for magnitudes)."""
    if pred is None or not math.isfinite(pred) or not math.isfinite(gt):
        return False
    p, g = abs(pred), abs(gt)
    if g <= thr or p <= thr:
        return abs(p - g) <= rel
    return abs(p - g) / g <= rel


def _symbol_variants(name: str) -> list[str]:
    plain = name.replace("{", "").replace("}", "")
    return sorted({name, plain}, key=len, reverse=True)


def substitute(expr: str, mapping: Mapping[str, float]) -> str:
    """Replace every symbol of ``mapping`` (and ``g``) in a LaTeX expression by its value in
    parentheses; symbols whose name contains ``theta`` are converted from degrees to radians."""
    out = expr
    items = sorted(mapping.items(), key=lambda kv: len(kv[0]), reverse=True)
    for name, value in items:
        v = math.radians(float(value)) if "theta" in name else float(value)
        for variant in _symbol_variants(name):
            pat = re.escape(variant) + (r"(?![A-Za-z0-9_])" if variant[-1].isalnum() else "")
            if variant[0].isalpha():
                pat = r"(?<![A-Za-z\\])" + pat
            out = re.sub(pat, f"({v!r})", out)
    return re.sub(r"(?<![A-Za-z\\])g(?![A-Za-z])", f"({G!r})", out)


def symbolic_match(expr: str, gt: float, mapping: Mapping[str, float] | None,
                   rel: float = 0.05, thr: float = 0.01, *, math_verify: bool = False) -> bool:  # fmt: skip
    """Whether a LaTeX expression evaluates, under ``mapping``, to ``gt`` by the 5 % rule.

    A symbol the mapping does not give is left in place and the answer scores ``False``.
    With ``math_verify=True`` an expression the built-in reader cannot evaluate is compared
    with ``llmcore.metrics.math_equivalent`` against ``gt`` after substitution.
    """
    if not mapping or not isinstance(expr, str) or len(expr) > _MAX_CHARS:
        return False
    sub = substitute(expr, mapping)
    value = latex_value(sub)
    if value is not None:
        return numeric_match(value, gt, rel, thr)
    if math_verify:
        from llmcore.metrics import math_equivalent

        try:
            return bool(math_equivalent(sub, repr(float(gt))))
        except Exception:
            return False
    return False


def _content(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], Mapping):
        return str(completion[-1].get("content", ""))
    return str(completion)


def _mapping(m: Any) -> dict[str, float] | None:
    if m is None or m == "":
        return None
    if isinstance(m, str):
        try:
            m = json.loads(m)
        except json.JSONDecodeError:
            return None
    return {str(k): float(v) for k, v in dict(m).items() if v is not None}


def check_answer(pred: str, gt: float | str, kind: str = "numeric",
                 mapping: Mapping[str, float] | str | None = None, *, rel: float = 0.05,
                 thr: float = 0.01, math_verify: bool = False) -> dict[str, Any]:  # fmt: skip
    """Grade one response: ``{"reward", "has_boxed", "parse_error", "pred"}``; never raises."""
    out: dict[str, Any] = {"reward": 0.0, "has_boxed": False, "parse_error": False, "pred": None}
    try:
        text = _content(pred)
        box = last_boxed(text)
        out["has_boxed"] = box is not None
        content = text if box is None else box
        g = float(gt) if not isinstance(gt, str) else to_float(gt)
        if g is None or not math.isfinite(g):
            out["parse_error"] = True
            return out
        if kind == "symbolic":
            m = _mapping(mapping)
            ok = symbolic_match(content, g, m, rel, thr, math_verify=math_verify)
            out["pred"] = latex_value(substitute(content, m)) if m else None
            out["reward"] = float(ok)
            return out
        if box is not None:
            value = to_float(content)
        else:
            value = to_float(content)
            if value is None:
                value = extract_number(re.sub(r"(?<=[A-Za-z])\^\{?-?\d+\}?", "", _clean(text)))
        out["pred"] = value
        if value is None:
            out["parse_error"] = True
        ok = numeric_match(value, g, rel, thr)
        if not ok and math_verify and content.strip():
            from llmcore.metrics import math_equivalent

            ok = bool(math_equivalent(content, str(gt)))
        out["reward"] = float(ok)
    except Exception:  # the reward never raises: a broken answer scores 0
        out["parse_error"] = True
        out["reward"] = 0.0
    return out


def _per_row(value: Any, n: int) -> list[Any]:
    if isinstance(value, list | tuple) and len(value) == n:
        return list(value)
    return [value] * n


def sim2reason_reward(completions: Sequence[Any], answer: Sequence[Any], kind: Any = "numeric",
                      given_variable_mapping: Any = None, *, rel: float = 0.05,
                      thr: float = 0.01, math_verify: bool = False,
                      **kwargs: Any) -> list[float]:  # fmt: skip
    """TRL reward function: 1.0 when the answer passes the 5 % rule, else 0.0.

    ``answer``, ``kind`` and ``given_variable_mapping`` arrive as dataset columns (one per
    completion); mappings may be dicts or JSON strings.
    """
    n = len(completions)
    kinds = _per_row(kind, n)
    maps = _per_row(given_variable_mapping, n)
    gts = _per_row(answer, n)
    return [
        check_answer(c, gt, k or "numeric", m, rel=rel, thr=thr, math_verify=math_verify)["reward"]
        for c, gt, k, m in zip(completions, gts, kinds, maps, strict=True)
    ]


def eval_reward(completions: Sequence[Any], answer: Sequence[Any], kind: Any = "numeric",
                given_variable_mapping: Any = None, *, rel: float = 0.01,
                **kwargs: Any) -> list[float]:  # fmt: skip
    """The evaluation reward: the same magnitude rule at a 1 % tolerance (see module notes)."""
    return sim2reason_reward(completions, answer, kind, given_variable_mapping, rel=rel, **kwargs)
