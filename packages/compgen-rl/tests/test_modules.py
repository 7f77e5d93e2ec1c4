"""Executor tables: tiny skills and routings by hand, fgx25 operators against the prior work's
documented behaviour (an independent re-statement below, 20 fixed cases each)."""

from __future__ import annotations

import random
import string

import pytest
from compgen_rl.hlsm import Program, execute
from compgen_rl.modules import FGX25_OPS, ROUTINGS, SKILLS, get_inventory


@pytest.mark.parametrize(
    ("skill", "x", "y"),
    [
        ("rev", "abcdef", "fedcba"),
        ("swap", "abcdef", "badcfe"),
        ("swap", "abcde", "badce"),
        ("inc", "abcdef", "bcdefa"),
        ("inc", "ffff", "aaaa"),
        ("rot1", "abcdef", "bcdefa"),
        ("sort", "fdbace", "abcdef"),
        ("mirror", "abcdef", "abccba"),
        ("mirror", "abcd", "abba"),
    ],
)
def test_tiny_skill_table(skill, x, y):
    assert SKILLS[skill](x) == y


def test_routing_table():
    ident = lambda s: s  # noqa: E731
    h = ["abcd", "efgh", "ijkl"]
    assert ROUTINGS["chain"].fn(h, ident) == "ijkl"
    assert ROUTINGS["recall"].fn(h, ident) == "abcd"
    assert ROUTINGS["skip"].fn(h, ident) == "efgh"
    assert ROUTINGS["splice"].fn(h, ident) == "ijgh"
    assert ROUTINGS["concat"].fn(h, ident) == "ijklefgh"
    assert ROUTINGS["interleave"].fn(h, ident) == "iejfkglh"
    assert ROUTINGS["reuse"].fn(h, ident) == "ijklijkl"
    assert ROUTINGS["head"].fn(h, lambda s: s.upper()) == "IJkl"
    assert ROUTINGS["select_if"].fn(h, ident) == "ijkl"
    assert ROUTINGS["select_if"].fn(["abcd", "xyz"], ident) == "abcd"
    assert ROUTINGS["zipmax"].fn(["q", "ab", "bac"], ident) == "bbc"


def test_program_execution_by_hand():
    p = Program((("chain", "rev"), ("splice", "sort"), ("skip", "inc")))
    t = execute(p, "abcd")
    assert t.hidden == ["dcba", "ccdd", "edcb"]
    assert t.answer == "edcb"


# --- fgx25: an independent statement of the prior generator's operators ----------------------


def _ref(op, s, p):
    vow = "aeiouAEIOU"
    if op == "deterministic_shuffle":
        if not s:
            return s
        m = next(m for m in range(3, 1000, 2) if all(len(s) % q or m % q for q in range(2, m + 1)))
        return "".join(s[i * m % len(s)] for i in range(len(s)))
    if op in ("repeat_str", "loop_concat"):
        return "".join(s for _ in range(p))
    if op == "remove_vowels":
        return "".join(filter(lambda c: c not in vow, s))
    if op == "sort_chars":
        return "".join(sorted(s))
    if op == "reverse_words":
        return " ".join(reversed(s.split()))
    if op == "add_prefix":
        return p + s
    if op == "add_suffix":
        return s + p
    if op in ("interlace_str", "recursive_interlace"):
        out = ""
        for i in range(max(len(s), len(p))):
            out += (s[i] if i < len(s) else "") + (p[i] if i < len(p) else "")
        return out
    if op == "rotate_str":
        k = p % len(s) if s else 0
        return s[k:] + s[:k]
    if op == "while_rotate":
        for _ in range(p if s else 0):
            s = s[1:] + s[:1]
        return s
    if op == "mirror_str":
        return s + "".join(reversed(s))
    if op == "alternate_case":
        return "".join(c.upper() if i & 1 else c.lower() for i, c in enumerate(s))
    if op == "shift_chars":
        lo, up = string.ascii_lowercase, string.ascii_uppercase
        tr = str.maketrans(lo + up, lo[p:] + lo[:p] + up[p:] + up[:p])
        return s.translate(tr)
    if op == "vowel_to_number":
        return s.translate(str.maketrans("aeiouAEIOU", "1234512345"))
    if op == "insert_separator":
        return p.join(list(s))
    if op == "duplicate_every_char":
        return "".join(2 * c for c in s)
    if op == "fancy_brackets":
        return "".join("«" + c + "»" for c in s)
    if op == "compress_repeats":
        import itertools

        return "".join(k for k, _ in itertools.groupby(s))
    if op == "recursive_reverse":
        return s[::-1]
    if op == "loop_filter_nonalpha":
        return "".join(c for c in s if c.isalpha())
    if op == "verify_even_length":
        return s[: len(s) - len(s) % 2]
    if op == "backchain_add_digit":
        # depth-first search in the order +1, 2+, a->3, reverse
        def dfs(t, d):
            if any(c.isdigit() for c in t):
                return t
            if not d:
                return None
            for nxt in (t + "1", "2" + t, t.replace("a", "3"), t[::-1]):
                r = dfs(nxt, d - 1)
                if r is not None:
                    return r
            return None

        r = dfs(s, p)
        return s if r is None else r
    if op == "backchain_palindrome":
        for _ in range(p):
            if s == s[::-1]:
                break
            s = s + s[::-1]
        return s
    raise AssertionError(op)


def _cases(op, n=20):
    rng = random.Random(sum(map(ord, op)))
    sk = SKILLS[op]
    alphabet = string.ascii_lowercase + "AEIOUxy 2-"
    out = []
    for _ in range(n):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9)))
        out.append((s, sk.params(rng) if sk.params else None))
    return out


@pytest.mark.parametrize("op", FGX25_OPS)
def test_fgx25_op_matches_prior_semantics(op):
    sk = SKILLS[op]
    cases = _cases(op)
    assert len(cases) == 20
    for s, p in cases:
        assert sk(s, p) == _ref(op, s, p), (op, s, p)


def test_fgx25_known_values():
    assert SKILLS["deterministic_shuffle"]("abcdef") == "afedcb"  # multiplier 5 (gcd(3, 6) = 3)
    assert SKILLS["deterministic_shuffle"]("abcd") == "adcb"
    assert SKILLS["shift_chars"]("xyzA", 3) == "abcD"
    assert SKILLS["backchain_add_digit"]("bcd", 1) == "bcd1"
    assert SKILLS["backchain_palindrome"]("ab", 2) == "abba"
    assert SKILLS["vowel_to_number"]("Education") == "2d5c1t34n"
    assert SKILLS["insert_separator"]("abc", "|") == "a|b|c"


def test_inventories():
    assert len(get_inventory("fgx25").skills) == 25
    inv = get_inventory("paper24x10")
    assert (len(inv.skills), len(inv.routings)) == (24, 10)
    tiny = get_inventory("tiny")
    assert tiny.skill_code("rev") == "k0" and tiny.decode("r3") == "splice"
