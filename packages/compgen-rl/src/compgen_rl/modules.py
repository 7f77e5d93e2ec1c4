"""Atomic modules of the Hierarchical Latent Selection Model: skills and routing mechanisms.

A *skill* is a local string operation ``k(s, *params) -> str``; a *routing mechanism* decides
which intermediate results step ``l`` reads and how the skill is applied to them:
``h_l = rho_R(h_0..h_{l-1}; k_K)`` (the step semantics of the latent-selection cascade).
The ``fgx25`` skills reproduce the 25 string operators of the prior compositional-RL generator
(f(x), g(x) -> f(g(x))); the ten routings are reconstructed (the paper's list is not public).
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from math import gcd
from typing import Any, Literal

from compgen_rl.errors import CompgenError, UnknownModuleError

__all__ = [
    "INVENTORIES",
    "ROUTINGS",
    "SKILLS",
    "Inventory",
    "Routing",
    "Skill",
    "get_inventory",
    "register_inventory",
    "register_routing",
    "register_skill",
]

ParamSampler = Callable[[random.Random], Any]


@dataclass(frozen=True)
class Skill:
    """A skill ``fn(s, *params)``; ``params`` samples one parameter value (``None``: no parameter)."""

    name: str
    fn: Callable[..., str]
    arity: int = 1
    params: ParamSampler | None = None

    def __call__(self, s: str, param: Any = None) -> str:
        return self.fn(s) if self.params is None else self.fn(s, param)


@dataclass(frozen=True)
class Routing:
    """A routing mechanism ``fn(history, skill) -> h_l`` valid from step ``min_step`` on.

    ``history`` is ``[h_0, ..., h_{l-1}]`` and ``skill`` a unary callable; ``even`` routings
    split a string in halves and refuse odd lengths."""

    name: str
    fn: Callable[[Sequence[str], Callable[[str], str]], str]
    min_step: int = 1
    even: bool = False


SKILLS: dict[str, Skill] = {}
ROUTINGS: dict[str, Routing] = {}


def register_skill(skill: Skill, *, replace: bool = False) -> Skill:
    """Add ``skill`` to :data:`SKILLS` (a duplicate name is an error unless ``replace``)."""
    if not skill.name or any(c.isspace() or c in ".|@/" for c in skill.name):
        raise CompgenError(f"skill name {skill.name!r} must be non-empty without spaces or .|@/")
    if skill.name in SKILLS and not replace:
        raise CompgenError(f"skill {skill.name!r} is already registered (pass replace=True)")
    SKILLS[skill.name] = skill
    return skill


def register_routing(routing: Routing, *, replace: bool = False) -> Routing:
    """Add ``routing`` to :data:`ROUTINGS` (a duplicate name is an error unless ``replace``)."""
    if not routing.name or any(c.isspace() or c in ".|@/" for c in routing.name):
        raise CompgenError(
            f"routing name {routing.name!r} must be non-empty without spaces or .|@/"
        )
    if routing.min_step < 1:
        raise CompgenError(
            f"routing {routing.name!r}: min_step must be >= 1, got {routing.min_step}"
        )
    if routing.name in ROUTINGS and not replace:
        raise CompgenError(f"routing {routing.name!r} is already registered (pass replace=True)")
    ROUTINGS[routing.name] = routing
    return routing


# --- tiny skills (length-preserving, alphabet a-f) -------------------------------------------

_TINY_ALPHABET = "abcdef"


def _inc(s: str) -> str:
    a = _TINY_ALPHABET
    return "".join(a[(a.index(c) + 1) % len(a)] if c in a else c for c in s)


def _swap(s: str) -> str:
    out = list(s)
    for i in range(0, len(s) - 1, 2):
        out[i], out[i + 1] = out[i + 1], out[i]
    return "".join(out)


def _mirror_half(s: str) -> str:
    return s[: (len(s) + 1) // 2] + s[: len(s) // 2][::-1]


for _sk in (
    Skill("rev", lambda s: s[::-1]),
    Skill("rot1", lambda s: s[1:] + s[:1]),
    Skill("inc", _inc),
    Skill("swap", _swap),
    Skill("sort", lambda s: "".join(sorted(s))),
    Skill("mirror", _mirror_half),
):
    register_skill(_sk)


# --- fgx25: the prior work's 25 operators (own implementation of their documented behaviour) --


def _shuffle(s: str) -> str:
    n = len(s)
    if n == 0:
        return s
    m = 3
    while gcd(m, n) != 1:
        m += 2
    return "".join(s[(i * m) % n] for i in range(n))


def _interlace(a: str, b: str) -> str:
    out = []
    for i in range(max(len(a), len(b))):
        out.extend(x[i] for x in (a, b) if i < len(x))
    return "".join(out)


def _recursive_interlace(a: str, b: str) -> str:
    k = min(len(a), len(b))
    return "".join(a[i] + b[i] for i in range(k)) + a[k:] + b[k:]


def _shift(s: str, k: int) -> str:
    def one(c: str) -> str:
        for base in ("a", "A"):
            if base <= c <= chr(ord(base) + 25):
                return chr((ord(c) - ord(base) + k) % 26 + ord(base))
        return c

    return "".join(one(c) for c in s)


def _compress(s: str) -> str:
    return "".join(c for i, c in enumerate(s) if i == 0 or s[i - 1] != c)


def _rotate(s: str, n: int) -> str:
    return s[n % len(s) :] + s[: n % len(s)] if s else s


def _while_rotate(s: str, n: int) -> str:
    for _ in range(n):
        if not s:
            break
        s = s[1:] + s[0]
    return s


def _backchain_digit(s: str, depth: int) -> str:
    steps = (lambda t: t + "1", lambda t: "2" + t, lambda t: t.replace("a", "3"), lambda t: t[::-1])

    def search(t: str, d: int) -> str | None:
        if any(c.isdigit() for c in t):
            return t
        if d == 0:
            return None
        for f in steps:
            found = search(f(t), d - 1)
            if found is not None:
                return found
        return None

    found = search(s, depth)
    return s if found is None else found


def _backchain_palindrome(s: str, depth: int) -> str:
    while s != s[::-1] and depth > 0:
        s, depth = s + s[::-1], depth - 1
    return s


def _letters(lo: int, hi: int) -> ParamSampler:
    return lambda r: "".join(r.choice(string.ascii_lowercase) for _ in range(r.randint(lo, hi)))


def _ints(lo: int, hi: int) -> ParamSampler:
    return lambda r: r.randint(lo, hi)


_VOWEL_DIGITS = {v: str(i + 1) for i, v in enumerate("aeiou")}

#: The prior work's operator names in their ``func_<i>`` order.
FGX25_OPS: tuple[str, ...] = (
    "deterministic_shuffle",
    "repeat_str",
    "remove_vowels",
    "sort_chars",
    "reverse_words",
    "add_prefix",
    "add_suffix",
    "interlace_str",
    "rotate_str",
    "mirror_str",
    "alternate_case",
    "shift_chars",
    "vowel_to_number",
    "insert_separator",
    "duplicate_every_char",
    "fancy_brackets",
    "compress_repeats",
    "recursive_reverse",
    "loop_concat",
    "while_rotate",
    "recursive_interlace",
    "loop_filter_nonalpha",
    "verify_even_length",
    "backchain_add_digit",
    "backchain_palindrome",
)

for _sk in (
    Skill("deterministic_shuffle", _shuffle),
    Skill("repeat_str", lambda s, n: s * n, params=_ints(2, 4)),
    Skill("remove_vowels", lambda s: "".join(c for c in s if c.lower() not in "aeiou")),
    Skill("sort_chars", lambda s: "".join(sorted(s))),
    Skill("reverse_words", lambda s: " ".join(s.split()[::-1])),
    Skill("add_prefix", lambda s, p: p + s, params=_letters(2, 4)),
    Skill("add_suffix", lambda s, p: s + p, params=_letters(2, 4)),
    # binary in the prior work (two sub-expressions); here the second operand is a literal leaf
    Skill("interlace_str", _interlace, arity=2, params=_letters(3, 6)),
    Skill("rotate_str", _rotate, params=_ints(1, 3)),
    Skill("mirror_str", lambda s: s + s[::-1]),
    Skill(
        "alternate_case",
        lambda s: "".join(c.upper() if i % 2 else c.lower() for i, c in enumerate(s)),
    ),
    Skill("shift_chars", _shift, params=_ints(1, 5)),
    Skill("vowel_to_number", lambda s: "".join(_VOWEL_DIGITS.get(c.lower(), c) for c in s)),
    Skill("insert_separator", lambda s, sep: sep.join(s), params=lambda r: r.choice("-_|")),
    Skill("duplicate_every_char", lambda s: "".join(c + c for c in s)),
    Skill("fancy_brackets", lambda s: "".join(f"«{c}»" for c in s)),
    Skill("compress_repeats", _compress),
    Skill("recursive_reverse", lambda s: s[::-1]),
    Skill("loop_concat", lambda s, n: s * n, params=_ints(2, 4)),
    Skill("while_rotate", _while_rotate, params=_ints(1, 3)),
    Skill("recursive_interlace", _recursive_interlace, arity=2, params=_letters(3, 6)),
    Skill("loop_filter_nonalpha", lambda s: "".join(c for c in s if c.isalpha())),
    Skill("verify_even_length", lambda s: s if len(s) % 2 == 0 else s[:-1]),
    Skill("backchain_add_digit", _backchain_digit, params=_ints(1, 3)),
    Skill("backchain_palindrome", _backchain_palindrome, params=_ints(1, 3)),
):
    register_skill(_sk)


# --- routings (reconstructed) ----------------------------------------------------------------


def _halves(s: str, who: str) -> tuple[str, str]:
    if len(s) % 2:
        raise CompgenError(
            f"routing {who!r} splits a string in halves but got odd length {len(s)} ({s!r}); "
            "use even input lengths / length-preserving skills with it, or drop it from the program"
        )
    return s[: len(s) // 2], s[len(s) // 2 :]


def _splice(h: Sequence[str], k: Callable[[str], str]) -> str:
    a, _ = _halves(h[-1], "splice")
    _, b = _halves(h[-2], "splice")
    return k(a + b)


def _head(h: Sequence[str], k: Callable[[str], str]) -> str:
    a, b = _halves(h[-1], "head")
    return k(a) + b


def _interleave(h: Sequence[str], k: Callable[[str], str]) -> str:
    return k(_interlace(h[-1], h[-2]))


def _zipmax(h: Sequence[str], k: Callable[[str], str]) -> str:
    a, b = h[-1], h[-2]
    n = max(len(a), len(b))
    return k("".join(max(a[i : i + 1], b[i : i + 1]) for i in range(n)))


for _r in (
    Routing("chain", lambda h, k: k(h[-1])),
    Routing("recall", lambda h, k: k(h[0])),
    Routing("skip", lambda h, k: k(h[-2]), min_step=2),
    Routing("splice", _splice, min_step=2, even=True),
    Routing("concat", lambda h, k: k(h[-1] + h[-2]), min_step=2),
    Routing("interleave", _interleave, min_step=2),
    Routing("reuse", lambda h, k: k(h[-1] + h[-1])),
    Routing("head", _head, even=True),
    Routing("select_if", lambda h, k: k(h[-1] if len(h[-1]) % 2 == 0 else h[0])),
    Routing("zipmax", _zipmax, min_step=2),
):
    register_routing(_r)


# --- inventories -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Inventory:
    """A module inventory: skills ``k<j>`` and routings ``r<i>`` (opaque codes by position),
    the input alphabet, input lengths ``[min_len, max_len_input]`` and the longest allowed
    intermediate string ``max_len`` (longer results are rejected, never truncated)."""

    name: str
    skills: tuple[str, ...]
    routings: tuple[str, ...]
    alphabet: str
    input_len: tuple[int, int] = (4, 4)
    max_len: int = 16
    notes: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.alphabet:
            raise CompgenError(f"inventory {self.name!r}: empty alphabet")
        bad = sorted(set(self.alphabet) & set("=\n\r .{}\"'"))
        if bad:
            raise CompgenError(f"inventory {self.name!r}: alphabet has reserved characters {bad}")
        lo, hi = self.input_len
        if not 1 <= lo <= hi:
            raise CompgenError(
                f"inventory {self.name!r}: input_len {self.input_len} needs 1 <= min <= max"
            )
        if self.max_len < hi:
            raise CompgenError(
                f"inventory {self.name!r}: max_len {self.max_len} < input length {hi}"
            )
        for s in self.skills:
            if s not in SKILLS:
                raise UnknownModuleError(
                    f"inventory {self.name!r}: unknown skill {s!r}; known: {sorted(SKILLS)}"
                )
        for r in self.routings:
            if r not in ROUTINGS:
                raise UnknownModuleError(
                    f"inventory {self.name!r}: unknown routing {r!r}; known: {sorted(ROUTINGS)}"
                )
        if not self.skills or not self.routings:
            raise CompgenError(f"inventory {self.name!r} needs at least one skill and one routing")
        if not any(ROUTINGS[r].min_step == 1 for r in self.routings):
            raise CompgenError(f"inventory {self.name!r}: no routing is valid at step 1")

    @property
    def modules(self) -> tuple[str, ...]:
        """Every module name (skills then routings), the inventory 𝓜 = 𝓚 ∪ 𝓡."""
        return (*self.skills, *self.routings)

    def skill_code(self, name: str) -> str:
        try:
            return f"k{self.skills.index(name)}"
        except ValueError:
            raise UnknownModuleError(
                f"skill {name!r} is not in inventory {self.name!r}: {self.skills}"
            ) from None

    def routing_code(self, name: str) -> str:
        try:
            return f"r{self.routings.index(name)}"
        except ValueError:
            raise UnknownModuleError(
                f"routing {name!r} is not in inventory {self.name!r}: {self.routings}"
            ) from None

    def decode(self, code: str) -> str:
        """Module name of an opaque code ``k<j>`` / ``r<i>`` (``UnknownModuleError`` otherwise)."""
        table = {"k": self.skills, "r": self.routings}.get(code[:1])
        if table is None or not code[1:].isdigit() or int(code[1:]) >= len(table):
            raise UnknownModuleError(
                f"unknown module code {code!r} for inventory {self.name!r} (skills k0..k{len(self.skills) - 1}, "
                f"routings r0..r{len(self.routings) - 1})"
            )
        return table[int(code[1:])]

    def routings_at(self, step: int) -> tuple[str, ...]:
        """Routings valid at step ``step`` (1-based)."""
        return tuple(r for r in self.routings if ROUTINGS[r].min_step <= step)

    def with_input_len(self, n: int | tuple[int, int] | None) -> Inventory:
        """A copy with fixed input length ``n`` (or a ``(min, max)`` range)."""
        if n is None:
            return self
        lo, hi = (n, n) if isinstance(n, int) else n
        return Inventory(
            self.name,
            self.skills,
            self.routings,
            self.alphabet,
            (lo, hi),
            max(self.max_len, hi),
            self.notes,
        )


INVENTORIES: dict[str, Callable[[], Inventory]] = {
    "tiny": lambda: Inventory(
        "tiny",
        ("rev", "rot1", "inc", "swap", "sort", "mirror"),
        ("chain", "recall", "skip", "splice"),
        _TINY_ALPHABET,
        (6, 6),
        16,
        "6 length-preserving skills x 4 routings over abcdef (CPU preset)",
    ),
    "fgx25": lambda: Inventory(
        "fgx25",
        FGX25_OPS,
        ("chain",),
        string.ascii_lowercase,
        (3, 10),
        64,
        "the prior work's 25 operators composed by plain chaining",
    ),
    "paper24x10": lambda: Inventory(
        "paper24x10",
        tuple(o for o in FGX25_OPS if o != "reverse_words"),
        (
            "chain",
            "recall",
            "skip",
            "splice",
            "concat",
            "interleave",
            "reuse",
            "head",
            "select_if",
            "zipmax",
        ),
        string.ascii_lowercase,
        (4, 8),
        96,
        "24 skills (reverse_words, the identity on space-free inputs, dropped) x 10 routings",
    ),
}


def register_inventory(
    name: str, factory: Callable[[], Inventory], *, replace: bool = False
) -> None:
    """Register an inventory preset under ``name``."""
    if name in INVENTORIES and not replace:
        raise CompgenError(f"inventory {name!r} is already registered (pass replace=True)")
    INVENTORIES[name] = factory


def get_inventory(name: Literal["tiny", "fgx25", "paper24x10"] | str | Inventory) -> Inventory:
    """The inventory preset ``name`` (an :class:`Inventory` passes through)."""
    if isinstance(name, Inventory):
        return name
    try:
        return INVENTORIES[name]()
    except KeyError:
        raise UnknownModuleError(
            f"unknown inventory {name!r}; known: {sorted(INVENTORIES)}"
        ) from None
