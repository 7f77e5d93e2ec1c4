"""Signature splits and datasets: SFT support, RL compositions, seen / unseen / OOD test sets.

Signatures of depth ``L_train`` are assigned to exactly one of C_SFT, C_RL, C_test; C_ood holds
depth ``L_train + 1`` signatures. Every module must occur in C_SFT (coverage). Strategies:

* ``random``: uniform partition of the signatures;
* ``position_holdout``: per skill one step position it never takes in C_SFT;
* ``routing_context``: per skill one local event (skill, last step, routing) held out of C_SFT,
  never an event whose routing computes the same value as another routing at that step.

C_RL and C_test then hold signatures with exactly one held-out event, split per event into
disjoint sets. RL data variants: ``compound``/``disjoint`` (C_RL), ``atomic`` (depth-1 prompts of
every module), ``overlap`` (C_RL := C_SFT).
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from compgen_rl.errors import CompgenError, InfeasibleSplitError, SplitCheckError
from compgen_rl.hlsm import (
    Program,
    Trace,
    execute,
    parse_signature,
    render_prompt,
    render_trace,
)
from compgen_rl.modules import ROUTINGS, SKILLS, Inventory, get_inventory

if TYPE_CHECKING:
    from datasets import DatasetDict

__all__ = [
    "SPLITS",
    "SplitConfig",
    "build_rows",
    "build_splits",
    "check_splits",
    "load_splits",
    "write_splits",
]

SPLITS = ("sft", "rl", "test_seen", "test_unseen", "test_ood", "probe_atomic")
_ENUM_CAP = 20_000


@dataclass
class SplitConfig:
    """How signatures and examples are drawn (defaults: the tiny preset, depth 3 / OOD 4)."""

    inventory: str = "tiny"
    """Inventory preset: tiny, fgx25 or paper24x10."""
    depth_train: int = 3
    """L_train: depth of SFT, RL and unseen-test compositions."""
    depth_ood: int = 4
    """Depth of the OOD test compositions (must exceed depth_train)."""
    input_len: int | None = None
    """Fixed input length (None: the inventory's range)."""
    strategy: Literal["random", "position_holdout", "routing_context"] = "position_holdout"
    """How signatures are assigned to SFT / RL / test."""
    holdout_events: tuple[str, ...] | None = None
    """Explicit held-out events (routing_context: 'skill@l/routing'; position_holdout: 'skill@l')."""
    context_routings: tuple[str, ...] = ("chain", "splice")
    """routing_context: routings under which a skill's held-out event may be picked."""
    rl_data: Literal["compound", "disjoint", "atomic", "overlap"] = "compound"
    """RL prompt source: C_RL (compound = disjoint), depth-1 atomic probes, or C_SFT (overlap)."""
    n_sig_sft: int | None = None
    """Cap on SFT signatures (None: every one left by the strategy)."""
    n_sig_rl: int | None = None
    """Cap on RL signatures (random strategy: its share, default a quarter)."""
    n_sig_test: int | None = None
    """Cap on unseen-test signatures (random strategy: default a quarter)."""
    n_sig_ood: int = 64
    """OOD signatures (depth_ood)."""
    n_sft: int = 4000
    """SFT examples (fresh inputs, signatures drawn uniformly)."""
    n_rl: int = 1000
    """RL prompts."""
    n_test: int = 500
    """Prompts per test split (seen, unseen)."""
    n_ood: int = 300
    """OOD prompts."""
    n_probe: int = 10
    """Depth-1 probe prompts per module."""
    style: Literal["plain", "chat"] = "plain"
    """Prompt style."""
    seed: int = 0
    """Seed of the signature split and of every input."""

    def __post_init__(self) -> None:
        if self.depth_train < 1:
            raise CompgenError(f"depth_train must be >= 1, got {self.depth_train}")
        if self.depth_ood <= self.depth_train:
            raise CompgenError(
                f"depth_ood={self.depth_ood} must be > depth_train={self.depth_train} (OOD means deeper)"
            )
        if self.strategy not in ("random", "position_holdout", "routing_context"):
            raise CompgenError(
                f"unknown strategy {self.strategy!r}; use random, position_holdout or routing_context"
            )
        if self.rl_data not in ("compound", "disjoint", "atomic", "overlap"):
            raise CompgenError(
                f"unknown rl_data {self.rl_data!r}; use compound, disjoint, atomic or overlap"
            )
        if self.holdout_events is not None:
            self.holdout_events = tuple(self.holdout_events)
        self.context_routings = tuple(self.context_routings)
        for name in ("n_sft", "n_rl", "n_test", "n_ood", "n_probe"):
            if getattr(self, name) < 0:
                raise CompgenError(f"{name} must be >= 0, got {getattr(self, name)}")
        get_inventory(self.inventory)  # unknown names fail here

    @classmethod
    def routing_context_cpu(cls, **overrides: Any) -> SplitConfig:
        """The CPU split on which RL after SFT was measured to help: tiny inventory, length-4
        inputs, L_train 2, one routing-context event per skill at step 2 (chain or splice)."""
        kw: dict[str, Any] = dict(
            inventory="tiny",
            depth_train=2,
            depth_ood=3,
            input_len=4,
            strategy="routing_context",
            holdout_events=(
                "sort@2/chain",
                "inc@2/chain",
                "mirror@2/chain",
                "rev@2/splice",
                "swap@2/splice",
                "rot1@2/splice",
            ),
            n_sft=80_000,
            n_rl=1000,
            n_test=500,
            n_ood=300,
        )
        kw.update(overrides)
        return cls(**kw)

    def resolved_inventory(self) -> Inventory:
        return get_inventory(self.inventory).with_input_len(self.input_len)


# --- signatures ------------------------------------------------------------------------------


def _sig(steps: Iterable[tuple[str, str]]) -> str:
    return "|".join(f"{r}.{k}" for r, k in steps)


def _count(inv: Inventory, depth: int) -> int:
    n = 1
    for i in range(1, depth + 1):
        n *= len(inv.routings_at(i)) * len(inv.skills)
    return n


def signatures(
    inv: Inventory, depth: int, rng: random.Random | None = None, cap: int = _ENUM_CAP
) -> list[str]:
    """Every feasible depth-``depth`` signature (sorted), or a seeded sample of ``cap`` of them
    when there are more. Feasible: some input of the inventory's lengths runs it within
    ``max_len`` (odd halves and over-long results are rejected, never truncated)."""
    per_step = [
        [(r, k) for r in inv.routings_at(i) for k in inv.skills] for i in range(1, depth + 1)
    ]
    rng = rng or random.Random(0)
    probe = random.Random(12345)
    if _count(inv, depth) <= cap:
        cands = sorted(_sig(c) for c in itertools.product(*per_step))
        return [s for s in cands if _feasible(s, inv, probe)]
    out: set[str] = set()
    for _ in range(50 * cap):
        s = _sig(rng.choice(p) for p in per_step)
        if s not in out and _feasible(s, inv, probe):
            out.add(s)
            if len(out) >= cap:
                break
    return sorted(out)


def _feasible(sig: str, inv: Inventory, rng: random.Random, tries: int = 8) -> bool:
    steps = parse_signature(sig)
    for _ in range(tries):
        hist = ["".join(rng.choice(inv.alphabet) for _ in range(rng.randint(*inv.input_len)))]
        try:
            for r, k in steps:
                sk = SKILLS[k]
                param = sk.params(rng) if sk.params is not None else None
                h = ROUTINGS[r].fn(hist, lambda s, _k=sk, _p=param: _k(s, _p))
                if len(h) > inv.max_len:
                    raise CompgenError("too long")
                hist.append(h)
            return True
        except CompgenError:
            continue
    return False


def _events(sig: str) -> list[str]:
    return [f"{k}@{i}/{r}" for i, (r, k) in enumerate(parse_signature(sig), start=1)]


def _event_key(event: str, strategy: str) -> str:
    return event.split("/")[0] if strategy == "position_holdout" else event


def aliased_routing(
    inv: Inventory, routing: str, step: int, probes: int = 64, seed: int = 0
) -> bool:
    """Whether ``routing`` at ``step`` computes the same value as another routing of ``inv`` on
    every probed history (e.g. ``recall`` = ``chain`` at step 1, ``skip`` = ``recall`` at step 2):
    such an event is not new to a model that saw the other one."""
    rng = random.Random(seed)
    lo, hi = inv.input_len
    ident = lambda s: s  # noqa: E731
    others = [r for r in inv.routings_at(step) if r != routing]
    for other in others:
        same = True
        for _ in range(probes):
            n = rng.randint(lo, hi)
            if ROUTINGS[routing].even or ROUTINGS[other].even:
                n += n % 2
            hist = ["".join(rng.choice(inv.alphabet) for _ in range(n))]
            for _ in range(step - 1):
                hist.append(
                    "".join(rng.sample(hist[-1], len(hist[-1])))
                    if rng.random() < 0.5
                    else "".join(rng.choice(inv.alphabet) for _ in range(n))
                )
            try:
                if ROUTINGS[routing].fn(hist, ident) != ROUTINGS[other].fn(hist, ident):
                    same = False
                    break
            except CompgenError:
                same = False
                break
        if same:
            return True
    return False


def _pick_events(cfg: SplitConfig, inv: Inventory, rng: random.Random) -> list[str]:
    if cfg.holdout_events is not None:
        events = list(cfg.holdout_events)
        for e in events:
            skill, _, rest = e.partition("@")
            pos, _, routing = rest.partition("/")
            if skill not in inv.skills or not pos.isdigit() or not 1 <= int(pos) <= cfg.depth_train:
                raise CompgenError(
                    f"held-out event {e!r}: need skill@step{'/routing' if cfg.strategy == 'routing_context' else ''} "
                    f"with a skill of {inv.name!r} and 1 <= step <= {cfg.depth_train}"
                )
            if cfg.strategy == "routing_context" and routing not in inv.routings_at(int(pos)):
                raise CompgenError(
                    f"held-out event {e!r}: routing {routing!r} is not valid at step {pos}"
                )
        return events
    skills = list(inv.skills)
    rng.shuffle(skills)
    if cfg.strategy == "position_holdout":
        return [f"{k}@{1 + i % cfg.depth_train}" for i, k in enumerate(skills)]
    step = cfg.depth_train
    ctx = [
        r
        for r in cfg.context_routings
        if r in inv.routings_at(step) and not aliased_routing(inv, r, step)
    ]
    if not ctx:
        raise InfeasibleSplitError(
            f"routing_context: none of {cfg.context_routings} is a valid, non-aliased routing at step "
            f"{step} of inventory {inv.name!r} (valid there: {inv.routings_at(step)})"
        )
    return [f"{k}@{step}/{ctx[i % len(ctx)]}" for i, k in enumerate(skills)]


def assign_signatures(cfg: SplitConfig) -> dict[str, Any]:
    """C_SFT, C_RL, C_test (depth L_train), C_ood (depth L_ood) and the held-out events."""
    inv = cfg.resolved_inventory()
    rng = random.Random(cfg.seed)
    sigs = signatures(inv, cfg.depth_train, rng)
    events: list[str] = []
    if cfg.strategy == "random":
        pool = sigs[:]
        rng.shuffle(pool)
        n_rl = cfg.n_sig_rl if cfg.n_sig_rl is not None else len(pool) // 4
        n_te = cfg.n_sig_test if cfg.n_sig_test is not None else len(pool) // 4
        if n_rl + n_te >= len(pool):
            raise InfeasibleSplitError(
                f"random split: {len(pool)} depth-{cfg.depth_train} signatures cannot give {n_rl} RL + "
                f"{n_te} test signatures and leave any for SFT"
            )
        rl, test, sft = pool[:n_rl], pool[n_rl : n_rl + n_te], pool[n_rl + n_te :]
    else:
        events = _pick_events(cfg, inv, rng)
        held = set(events)
        by_event: dict[str, list[str]] = {e: [] for e in events}
        sft = []
        for s in sigs:
            hits = [e for e in _events(s) if _event_key(e, cfg.strategy) in held]
            if not hits:
                sft.append(s)
            elif len(hits) == 1:
                by_event[_event_key(hits[0], cfg.strategy)].append(s)
        rl, test = [], []
        for e in events:
            group = sorted(by_event[e])
            rng.shuffle(group)
            if len(group) < 2:
                raise InfeasibleSplitError(
                    f"held-out event {e!r} occurs alone in {len(group)} depth-{cfg.depth_train} "
                    "signature(s); need >= 2 to give RL and test disjoint ones"
                )
            half = len(group) // 2
            rl += group[:half]
            test += group[half:]
        if cfg.n_sig_rl is not None:
            if cfg.n_sig_rl > len(rl):
                raise InfeasibleSplitError(
                    f"n_sig_rl={cfg.n_sig_rl} but only {len(rl)} RL signatures exist"
                )
            rl = sorted(rng.sample(rl, cfg.n_sig_rl))
        if cfg.n_sig_test is not None:
            if cfg.n_sig_test > len(test):
                raise InfeasibleSplitError(
                    f"n_sig_test={cfg.n_sig_test} but only {len(test)} test signatures exist"
                )
            test = sorted(rng.sample(test, cfg.n_sig_test))
    if cfg.n_sig_sft is not None:
        if cfg.n_sig_sft > len(sft):
            raise InfeasibleSplitError(
                f"n_sig_sft={cfg.n_sig_sft} but only {len(sft)} SFT signatures exist"
            )
        sft = sorted(rng.sample(sorted(sft), cfg.n_sig_sft))
    covered = {m for s in sft for pair in parse_signature(s) for m in pair}
    missing = [m for m in inv.modules if m not in covered]
    if missing:
        raise InfeasibleSplitError(
            f"coverage impossible: modules {missing} occur in none of the {len(sft)} SFT signatures; "
            "hold out fewer events or use more SFT signatures"
        )
    ood_all = signatures(inv, cfg.depth_ood, rng, cap=max(cfg.n_sig_ood * 20, 2000))
    if len(ood_all) < cfg.n_sig_ood:
        raise InfeasibleSplitError(
            f"n_sig_ood={cfg.n_sig_ood} but only {len(ood_all)} depth-{cfg.depth_ood} signatures exist"
        )
    ood = sorted(rng.sample(ood_all, cfg.n_sig_ood))
    return {
        "sft": sorted(sft),
        "rl": sorted(rl),
        "test": sorted(test),
        "ood": ood,
        "events": events,
    }


# --- examples --------------------------------------------------------------------------------


_STATIC: dict[tuple[str, str, str], tuple[Any, ...]] = {}


def _static(sig: str, inv: Inventory, style: str) -> tuple[Any, ...] | None:
    """Per-signature parts of a parameter-free program (steps, prompt pieces, JSON, modules)."""
    key = (sig, inv.name, style)
    hit = _STATIC.get(key)
    if hit is None:
        steps = parse_signature(sig)
        if any(SKILLS[k].params is not None for _, k in steps):
            return None
        prog = Program(tuple(steps), inv.name)
        pre, _, post = render_prompt(prog, "\x00", style, inventory=inv).partition("\x00")  # type: ignore[arg-type]
        fns = tuple((ROUTINGS[r].fn, SKILLS[k].fn) for r, k in steps)
        hit = (prog, pre, post, prog.to_json(), prog.modules, fns)
        _STATIC[key] = hit
    return hit


def _example(
    sig: str,
    inv: Inventory,
    rng: random.Random,
    style: str,
    tag: str,
    heldout: str,
    avoid: set[tuple[str, str]] | None = None,
    tries: int = 100,
) -> dict[str, Any]:
    last: Exception | None = None
    static = _static(sig, inv, style)
    for _ in range(tries):
        if static is not None:
            prog, pre, post, pjson, modules, fns = static
        else:
            steps = []
            for r, k in parse_signature(sig):
                sampler = SKILLS[k].params
                steps.append((r, k) if sampler is None else (r, k, sampler(rng)))
            prog = Program(tuple(steps), inv.name)
        n = rng.randint(*inv.input_len)
        x = "".join([rng.choice(inv.alphabet) for _ in range(n)])
        if avoid is not None and (sig, x) in avoid:
            continue
        try:
            if static is not None:  # fast path: the executor's semantics without re-validation
                hist = [x]
                for route, skill in fns:
                    h = route(hist, skill)
                    if len(h) > inv.max_len:
                        raise CompgenError(f"{len(h)} characters > max_len={inv.max_len}")
                    hist.append(h)
                trace = Trace(x, hist[1:], hist[-1])
            else:
                trace = execute(prog, x, max_len=inv.max_len)
        except CompgenError as e:  # odd length for a halving routing, too long: resample
            last = e
            continue
        return {
            "prompt": pre + x + post
            if static is not None
            else render_prompt(prog, x, style, inventory=inv),  # type: ignore[arg-type]
            "completion": render_trace(trace),
            "answer": trace.answer,
            "program": pjson if static is not None else prog.to_json(),
            "input": x,
            "signature": sig,
            "depth": prog.depth,
            "split_tag": tag,
            "heldout": heldout,
            "modules": list(modules) if static is not None else prog.modules,
        }
    raise InfeasibleSplitError(
        f"signature {sig!r}: no valid example in {tries} draws (last error: {last})"
    )


def _draw(
    sigs: Sequence[str],
    n: int,
    inv: Inventory,
    rng: random.Random,
    style: str,
    tag: str,
    heldout_of: dict[str, str],
    avoid: set | None = None,
) -> list[dict[str, Any]]:
    if n and not sigs:
        raise InfeasibleSplitError(f"split {tag!r} needs {n} examples but has no signatures")
    pool = list(sigs)
    return [
        _with_heldout(_example(rng.choice(pool), inv, rng, style, tag, "", avoid), heldout_of)
        for _ in range(n)
    ]


def _with_heldout(row: dict[str, Any], heldout_of: dict[str, str]) -> dict[str, Any]:
    row["heldout"] = heldout_of.get(row["signature"], "")
    return row


def build_rows(cfg: SplitConfig) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """Rows of every split (plain dicts) and the split metadata; deterministic in ``cfg.seed``."""
    inv = cfg.resolved_inventory()
    a = assign_signatures(cfg)
    rng = random.Random(cfg.seed + 1)
    held = set(a["events"])
    heldout_of = {}
    for s in a["rl"] + a["test"]:
        hits = [e for e in _events(s) if _event_key(e, cfg.strategy) in held]
        heldout_of[s] = _event_key(hits[0], cfg.strategy) if hits else ""
    rows: dict[str, list[dict[str, Any]]] = {}
    rows["test_seen"] = _draw(a["sft"], cfg.n_test, inv, rng, cfg.style, "seen", heldout_of)
    seen_pairs = {(r["signature"], r["input"]) for r in rows["test_seen"]}
    rows["test_unseen"] = _draw(a["test"], cfg.n_test, inv, rng, cfg.style, "unseen", heldout_of)
    rows["test_ood"] = _draw(a["ood"], cfg.n_ood, inv, rng, cfg.style, "ood", heldout_of)
    atomic = []
    for k in inv.skills:
        for r in inv.routings_at(1):
            atomic.append(_sig([(r, k)]))
    probes = []
    for s in atomic:
        probes += [_example(s, inv, rng, cfg.style, "probe", "") for _ in range(cfg.n_probe)]
    rows["probe_atomic"] = probes
    if cfg.rl_data in ("compound", "disjoint"):
        rows["rl"] = _draw(a["rl"], cfg.n_rl, inv, rng, cfg.style, f"rl_{cfg.rl_data}", heldout_of)
    elif cfg.rl_data == "overlap":
        rows["rl"] = _draw(a["sft"], cfg.n_rl, inv, rng, cfg.style, "rl_overlap", heldout_of)
    else:
        rows["rl"] = _draw(atomic, cfg.n_rl, inv, rng, cfg.style, "rl_atomic", heldout_of)
    rows["sft"] = _draw(
        a["sft"], cfg.n_sft, inv, rng, cfg.style, "sft", heldout_of, avoid=seen_pairs
    )
    meta = {
        "config": _jsonable(asdict(cfg)),
        "signatures": {"sft": a["sft"], "rl": a["rl"], "test": a["test"], "ood": a["ood"]},
        "heldout_events": a["events"],
        "coverage": sorted({m for s in a["sft"] for pair in parse_signature(s) for m in pair}),
        "counts": {k: len(v) for k, v in rows.items()},
    }
    return {k: rows[k] for k in SPLITS}, meta


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(d, default=list))


def build_splits(cfg: SplitConfig) -> DatasetDict:
    """The splits ``sft, rl, test_seen, test_unseen, test_ood, probe_atomic`` as a
    ``datasets.DatasetDict`` (columns prompt, completion, answer, program (JSON), input,
    signature, depth, split_tag, heldout, modules); metadata in ``.info``-free form via
    :func:`build_rows`."""
    from datasets import Dataset, DatasetDict

    rows, _ = build_rows(cfg)
    return DatasetDict(
        {k: Dataset.from_list(v) if v else Dataset.from_dict({}) for k, v in rows.items()}
    )


def _rows_of(split: Any) -> list[dict[str, Any]]:
    if isinstance(split, list):
        return split
    return [dict(r) for r in split] if len(split) else []


def check_splits(dd: Any, inventory: str | Inventory | None = None) -> dict[str, Any]:
    """Check disjointness and coverage; raise :class:`SplitCheckError` naming the violation.

    C_SFT, C_RL (unless ``rl_overlap``/``rl_atomic``) and C_test are pairwise disjoint;
    ``test_seen`` lies in C_SFT; every inventory module occurs in C_SFT; test and OOD modules are
    covered; no held-out event of RL/test rows occurs in SFT rows. Returns summary counts."""
    rows = {k: _rows_of(dd[k]) for k in SPLITS if k in dd}
    sig = {k: {r["signature"] for r in v} for k, v in rows.items()}
    if inventory is None:
        first = next((r for v in rows.values() for r in v), None)
        inventory = json.loads(first["program"])["inventory"] if first else "tiny"
    inv = get_inventory(inventory)
    rl_tag = (
        rows.get("rl", [{}])[0].get("split_tag", "rl_compound") if rows.get("rl") else "rl_compound"
    )
    pairs = [("sft", "test_unseen")]
    if rl_tag in ("rl_compound", "rl_disjoint"):
        pairs += [("sft", "rl"), ("rl", "test_unseen")]
    for a, b in pairs:
        both = sig.get(a, set()) & sig.get(b, set())
        if both:
            raise SplitCheckError(
                f"splits {a} and {b} share {len(both)} signature(s), e.g. {sorted(both)[:3]}"
            )
    extra = sig.get("test_seen", set()) & (
        sig.get("test_unseen", set()) | sig.get("test_ood", set())
    )
    if rl_tag in ("rl_compound", "rl_disjoint"):
        extra |= sig.get("test_seen", set()) & sig.get("rl", set())
    if extra:
        raise SplitCheckError(
            f"test_seen shares {len(extra)} signature(s) with unseen/RL splits, e.g. {sorted(extra)[:3]}"
        )
    covered = {m for r in rows.get("sft", []) for m in r["modules"]}
    missing = [m for m in inv.modules if m not in covered]
    if missing:
        raise SplitCheckError(f"SFT does not cover modules {missing} of inventory {inv.name!r}")
    for split in ("test_seen", "test_unseen", "test_ood"):
        unc = {m for r in rows.get(split, []) for m in r["modules"]} - covered
        if unc:
            raise SplitCheckError(f"{split} uses modules not covered by SFT: {sorted(unc)}")
    held = {
        r["heldout"] for k in ("rl", "test_unseen") for r in rows.get(k, []) if r.get("heldout")
    }
    if held:
        for r in rows.get("sft", []) + rows.get("test_seen", []):
            evs = _events(r["signature"])
            hit = [e for e in evs if e in held or e.split("/")[0] in held]
            if hit:
                raise SplitCheckError(
                    f"held-out event {hit[0]!r} occurs in {r['split_tag']} signature {r['signature']!r}"
                )
    return {
        "signatures": {k: len(v) for k, v in sig.items()},
        "heldout_events": sorted(held),
        "coverage": sorted(covered),
    }


def write_splits(cfg: SplitConfig, out: str | Path) -> dict[str, Any]:
    """Write ``out/{split}.jsonl`` and ``out/meta.json`` (byte-identical for one config)."""
    rows, meta = build_rows(cfg)
    check_splits(rows, cfg.resolved_inventory())
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for k, v in rows.items():
        (out / f"{k}.jsonl").write_text(
            "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in v),
            encoding="utf-8",
        )
    (out / "meta.json").write_text(
        json.dumps(meta, sort_keys=True, indent=1) + "\n", encoding="utf-8"
    )
    return meta


def load_splits(
    data_dir: str | Path, splits: Sequence[str] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Read the ``{split}.jsonl`` files written by :func:`write_splits`."""
    from llmcore.data import read_jsonl

    d = Path(data_dir)
    if not d.is_dir():
        raise CompgenError(
            f"data directory {str(d)!r} does not exist; create it with `compgen-rl make-data --out {d}`"
        )
    out = {}
    for k in splits or SPLITS:
        p = d / f"{k}.jsonl"
        if not p.exists():
            raise CompgenError(f"{p} is missing (known splits: {', '.join(SPLITS)})")
        out[k] = read_jsonl(p)
    return out


def rows_to_dataset(rows: list[dict[str, Any]]):
    """A ``datasets.Dataset`` from rows."""
    from datasets import Dataset

    return Dataset.from_list(rows)
