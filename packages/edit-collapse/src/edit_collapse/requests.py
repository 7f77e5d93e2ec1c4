"""Edit requests and their loaders (ZsRE, CounterFact, EasyEdit JSON, plain JSONL, HF datasets),
plus requests drawn from the synthetic world."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edit_collapse.errors import EditInputError


@dataclass
class EditRequest:
    """One fact edit: ``prompt`` (contains ``subject``) should be completed by ``target_new``.

    ``locality`` and ``portability`` map a name to ``(prompt, answer)`` pairs."""

    prompt: str
    subject: str
    target_new: str
    ground_truth: str | None = None
    rephrase: list[str] = field(default_factory=list)
    locality: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    portability: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    case_id: int | str = 0

    def __post_init__(self) -> None:
        if not self.target_new or not str(self.target_new).strip():
            raise EditInputError(
                f"request {self.case_id!r} ({self.prompt!r}) has an empty target_new"
            )
        if not self.prompt:
            raise EditInputError(f"request {self.case_id!r} has an empty prompt")

    def fact(self) -> str:
        """The edited fact as one sentence (the retrieval memory's entry)."""
        return f"{self.prompt} {self.target_new.strip()}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id, "prompt": self.prompt, "subject": self.subject,
            "target_new": self.target_new, "ground_truth": self.ground_truth,
            "rephrase": list(self.rephrase),
            "locality": {k: [list(p) for p in v] for k, v in self.locality.items()},
            "portability": {k: [list(p) for p in v] for k, v in self.portability.items()},
        }  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EditRequest:
        return cls(
            prompt=d["prompt"], subject=d["subject"], target_new=d["target_new"],
            ground_truth=d.get("ground_truth"), rephrase=list(d.get("rephrase") or []),
            locality={k: [tuple(p) for p in v] for k, v in (d.get("locality") or {}).items()},
            portability={k: [tuple(p) for p in v] for k, v in (d.get("portability") or {}).items()},
            case_id=d.get("case_id", 0),
        )  # fmt: skip


def _as_list(x: Any) -> list[str]:
    if x is None:
        return []
    return [x] if isinstance(x, str) else list(x)


def _zsre(i: int, d: dict[str, Any]) -> EditRequest:
    alt = d["alt"] if isinstance(d["alt"], str) else d["alt"][0]
    loc = [(d["loc"].removeprefix("nq question: "), d.get("loc_ans", ""))] if d.get("loc") else []
    port = {}
    if d.get("portability"):
        port = {k: [(p["prompt"] if isinstance(p, dict) else p[0],
                     p.get("answer", p.get("ground_truth", "")) if isinstance(p, dict) else p[1])
                    for p in v] for k, v in d["portability"].items()}  # fmt: skip
    return EditRequest(
        prompt=d["src"], subject=d["subject"], target_new=alt,
        ground_truth=(_as_list(d.get("answers")) or [None])[0], rephrase=_as_list(d.get("rephrase")),
        locality={"neighborhood": loc} if loc else {}, portability=port, case_id=d.get("case_id", i),
    )  # fmt: skip


def _counterfact(i: int, d: dict[str, Any]) -> EditRequest:
    rr = d.get("requested_rewrite", d)
    subj = rr["subject"]
    prompt = rr["prompt"].format(subj) if "{}" in rr["prompt"] else rr["prompt"]
    tn = rr["target_new"]["str"] if isinstance(rr["target_new"], dict) else rr["target_new"]
    tt = rr.get("target_true")
    gt = tt["str"] if isinstance(tt, dict) else tt
    neigh = [(p, gt or "") for p in d.get("neighborhood_prompts", [])[:10]]
    return EditRequest(
        prompt=prompt, subject=subj, target_new=tn, ground_truth=gt,
        rephrase=list(d.get("paraphrase_prompts", [])),
        locality={"neighborhood": neigh} if neigh else {}, case_id=d.get("case_id", i),
    )  # fmt: skip


def _easyedit(i: int, d: dict[str, Any]) -> EditRequest:
    def pairs(block: Any) -> dict[str, list[tuple[str, str]]]:
        out: dict[str, list[tuple[str, str]]] = {}
        for k, v in (block or {}).items():
            ps, gs = _as_list(v.get("prompt")), _as_list(v.get("ground_truth"))
            if len(ps) != len(gs):
                raise EditInputError(f"case {i}: {k} has {len(ps)} prompts and {len(gs)} answers")
            out[k] = list(zip(ps, gs, strict=True))
        return out

    return EditRequest(
        prompt=d["prompt"], subject=d["subject"], target_new=d["target_new"],
        ground_truth=d.get("ground_truth"), rephrase=_as_list(d.get("rephrase_prompt") or d.get("rephrase")),
        locality=pairs(d.get("locality")), portability=pairs(d.get("portability")),
        case_id=d.get("case_id", i),
    )  # fmt: skip


_FORMATS = {"zsre": _zsre, "counterfact": _counterfact, "easyedit": _easyedit,
            "jsonl": lambda i, d: EditRequest.from_dict({"case_id": i, **d})}  # fmt: skip


def load_requests(
    source: str | Path | Any, fmt: str = "zsre", limit: int | None = None
) -> list[EditRequest]:
    """Edit requests from a JSON list / JSONL file or a ``datasets.Dataset`` in ``fmt``
    (``zsre``, ``counterfact``, ``easyedit`` or ``jsonl`` = :meth:`EditRequest.to_dict` rows)."""
    if fmt not in _FORMATS:
        raise EditInputError(f"fmt={fmt!r} is not one of {sorted(_FORMATS)}")
    if isinstance(source, (str, Path)):
        p = Path(source)
        if not p.is_file():
            raise EditInputError(f"data file {str(p)!r} does not exist")
        text = p.read_text()
        if text.lstrip().startswith("["):
            rows = json.loads(text)
        else:
            from llmcore.data import read_jsonl

            rows = read_jsonl(p)
    else:
        from llmcore.data import from_dataset

        rows = from_dataset(source)
    rows = rows[:limit] if limit else rows
    out = []
    for i, d in enumerate(rows):
        try:
            out.append(_FORMATS[fmt](i, d))
        except KeyError as e:
            raise EditInputError(f"row {i} of {source!s} lacks field {e} for fmt={fmt!r}") from None
    return out


def world_requests(world: Any, n: int, seed: int = 0, n_locality: int = 4) -> list[EditRequest]:
    """``n`` edit requests on distinct facts of a synthetic world: new value != old, template 0
    as prompt, templates 1-2 as rephrases, unedited facts as locality, the 2-hop question with
    the new value's answer as portability."""
    from edit_collapse import world as W

    rng = random.Random(seed)
    facts = list(world.facts)
    if n > len(facts):
        raise EditInputError(f"n={n} edits but the world has {len(facts)} facts")
    chosen = rng.sample(facts, n)
    edited = {(f.subject, f.relation) for f in chosen}
    others = [f for f in facts if (f.subject, f.relation) not in edited]
    out = []
    for i, f in enumerate(chosen):
        vals = [v for v in W.RELATIONS[f.relation]["values"] if v != f.value]
        new = rng.choice(vals)
        loc = rng.sample(others, min(n_locality, len(others)))
        out.append(
            EditRequest(
                prompt=f.prompt(0),
                subject=f.subject,
                target_new=new,
                ground_truth=f.value,
                rephrase=[f.prompt(1), f.prompt(2)],
                locality={"neighborhood": [(g.prompt(0), g.value) for g in loc]},
                portability={"two_hop": [(f.hop_prompt(), W.hop_answer(f.relation, new))]},
                case_id=i,
            )
        )
    return out
