"""SpecBench data in the official layout and the flattened hub columns.

``data/<Scenario>/{scenario.json, specifications.json, prompts.json}``; the 103 official
specifications (and the scenario descriptions) ship with this package, the 1,500 prompts do not:
pass ``data_dir`` (a clone of the official ``data/`` folder) or use :func:`load_scenario_hf`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from spec_align.errors import DataFormatError, SpecConfigError, SpecFormatError

if TYPE_CHECKING:
    from spec_align.rules import RuleSet

SCENARIOS: tuple[str, ...] = ("Biochem", "Child", "Code", "Health", "Travel")
LABELS = ("safe", "unsafe")


@dataclass
class PromptItem:
    """One SpecBench prompt; the official data has no id, so it is ``f"{scenario}-{index}"``."""

    id: str
    label: Literal["safe", "unsafe"]
    prompt: str
    adversarial_prompt: str
    source: str = ""
    answer: str = ""
    prompt_comment: str = ""

    def to_official(self) -> dict[str, Any]:
        """The item as stored in ``prompts.json`` (plus ``id``/``prompt_comment`` if set)."""
        d: dict[str, Any] = {
            "adversarial_prompt": self.adversarial_prompt,
            "prompt": self.prompt,
            "label": self.label,
            "source": self.source,
            "answer": self.answer,
        }
        if self.prompt_comment:
            d["prompt_comment"] = self.prompt_comment
        d["id"] = self.id
        return d


@dataclass
class Scenario:
    """A deployment scenario: its specifications (safety first, behavioral second) and prompts."""

    name: str
    title: str
    description: str
    safety_specs: list[str]
    behavioral_specs: list[str]
    items: list[PromptItem] = field(default_factory=list)
    rules: RuleSet | None = None

    @property
    def n_specs(self) -> int:
        return len(self.safety_specs) + len(self.behavioral_specs)

    def item_by_id(self) -> dict[str, PromptItem]:
        return {it.id: it for it in self.items}


def vendored_dir() -> Path:
    """Folder of the vendored official ``scenario.json`` + ``specifications.json`` files."""
    return Path(str(resources.files("spec_align") / "data"))


def _read_json(path: Path, err: type[Exception]) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise err(f"{path} does not exist") from None
    except json.JSONDecodeError as exc:
        raise err(f"{path} is not valid JSON: {exc}") from None


def parse_specifications(obj: Any, source: str = "specifications.json") -> tuple[list, list]:
    """Validate a ``specifications.json`` object; returns (safety, behavioral) lists."""
    if not isinstance(obj, dict):
        raise SpecFormatError(f"{source}: expected a JSON object, got {type(obj).__name__}")
    out = []
    for key in ("safety_specifications", "behavioral_specifications"):
        if key not in obj:
            raise SpecFormatError(f"{source}: missing key {key!r}")
        specs = obj[key]
        if not isinstance(specs, list) or not specs:
            raise SpecFormatError(f"{source}: {key!r} must be a non-empty list of strings")
        for i, s in enumerate(specs):
            if not isinstance(s, str) or not s.strip():
                raise SpecFormatError(f"{source}: {key}[{i}] must be a non-empty string, got {s!r}")
        out.append(list(specs))
    return out[0], out[1]


def parse_prompts(
    obj: Any, scenario: str, source: str = "prompts.json", *, adversarial: bool = True
) -> list[PromptItem]:
    """Validate a ``prompts.json`` list into :class:`PromptItem` s (ids ``<scenario>-<index>``)."""
    if not isinstance(obj, list):
        raise DataFormatError(f"{source}: expected a JSON list of items")
    items = []
    for i, d in enumerate(obj):
        if not isinstance(d, dict):
            raise DataFormatError(f"{source}: item {i} is not an object")
        if d.get("label") not in LABELS:
            raise DataFormatError(
                f"{source}: item {i} has label {d.get('label')!r}; expected 'safe' or 'unsafe'"
            )
        if not isinstance(d.get("prompt"), str):
            raise DataFormatError(f"{source}: item {i} has no 'prompt' string")
        adv = d.get("adversarial_prompt")
        if not isinstance(adv, str):
            if adversarial:
                raise DataFormatError(
                    f"{source}: item {i} has no 'adversarial_prompt' (needed for adversarial "
                    "generation; pass adversarial=False / --no-adversarial to use 'prompt')"
                )
            adv = d["prompt"]
        answer = d.get("answer")
        items.append(
            PromptItem(
                id=str(d.get("id", f"{scenario}-{i}")),
                label=d["label"],
                prompt=d["prompt"],
                adversarial_prompt=adv,
                source=str(d.get("source", "")),
                answer="" if answer is None else str(answer),
                prompt_comment=str(d.get("prompt_comment", "") or ""),
            )
        )
    return items


def _resolve_dir(name: str, data_dir: str | Path | None) -> Path:
    base = Path(data_dir) if data_dir is not None else vendored_dir()
    folder = base / name
    if not folder.is_dir():
        known = (
            sorted({*SCENARIOS, *(p.name for p in base.iterdir() if p.is_dir())})
            if (base.is_dir())
            else list(SCENARIOS)
        )
        raise SpecConfigError(
            f"unknown scenario {name!r}: no folder {folder}; valid names: {', '.join(known)}"
        )
    return folder


def load_scenario(
    name: str,
    data_dir: str | Path | None = None,
    *,
    specs_only: bool = False,
    adversarial: bool = True,
) -> Scenario:
    """Load ``<data_dir>/<name>/`` in the official layout.

    Without ``data_dir`` the vendored official specifications are used (no prompts).
    ``rules.json`` next to ``specifications.json`` (synthetic scenarios) becomes ``rules``.
    """
    from spec_align.rules import RuleSet

    folder = _resolve_dir(name, data_dir)
    meta = _read_json(folder / "scenario.json", SpecFormatError)
    if not isinstance(meta, dict):
        raise SpecFormatError(f"{folder / 'scenario.json'}: expected an object")
    safety, behavioral = parse_specifications(
        _read_json(folder / "specifications.json", SpecFormatError),
        str(folder / "specifications.json"),
    )
    items: list[PromptItem] = []
    if not specs_only:
        p = folder / "prompts.json"
        if not p.exists():
            if data_dir is None:
                raise DataFormatError(
                    f"the prompts of {name!r} are not shipped with spec-align; pass data_dir= "
                    "(a copy of the official SpecBench data/ folder), use load_scenario_hf, or "
                    "specs_only=True"
                )
            raise DataFormatError(f"{p} does not exist")
        items = parse_prompts(_read_json(p, DataFormatError), name, str(p), adversarial=adversarial)
    rules = None
    if (folder / "rules.json").exists():
        rules = RuleSet.from_json(_read_json(folder / "rules.json", DataFormatError))
        rules.check_counts(len(safety), len(behavioral), str(folder / "rules.json"))
    return Scenario(
        name=name,
        title=str(meta.get("name", name)),
        description=str(meta.get("description", "")),
        safety_specs=safety,
        behavioral_specs=behavioral,
        items=items,
        rules=rules,
    )


def write_scenario(s: Scenario, out_dir: str | Path) -> Path:
    """Write ``s`` to ``<out_dir>/<s.name>/`` in the official layout (+ ``rules.json``)."""
    from llmcore.data import atomic_write_json

    folder = Path(out_dir) / s.name
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_json(folder / "scenario.json", {"name": s.title, "description": s.description})
    atomic_write_json(
        folder / "specifications.json",
        {"safety_specifications": s.safety_specs, "behavioral_specifications": s.behavioral_specs},
    )
    atomic_write_json(folder / "prompts.json", [it.to_official() for it in s.items])
    if s.rules is not None:
        atomic_write_json(folder / "rules.json", s.rules.to_json())
    return folder


def validate_dir(data_dir: str | Path) -> dict[str, dict[str, int]]:
    """Load every scenario folder under ``data_dir``; returns counts or raises the first error."""
    out = {}
    base = Path(data_dir)
    if not base.is_dir():
        raise DataFormatError(f"{base} is not a directory")
    for folder in sorted(p for p in base.iterdir() if (p / "specifications.json").exists()):
        s = load_scenario(folder.name, base)
        out[folder.name] = {
            "safety_specs": len(s.safety_specs),
            "behavioral_specs": len(s.behavioral_specs),
            "prompts": len(s.items),
            "unsafe": sum(it.label == "unsafe" for it in s.items),
            "safe": sum(it.label == "safe" for it in s.items),
        }
    if not out:
        raise DataFormatError(f"{base} holds no <Scenario>/specifications.json folder")
    return out


def scenario_from_rows(rows: list[dict[str, Any]], split: str) -> Scenario:
    """Rebuild a :class:`Scenario` from the hub's flattened columns."""
    if not rows:
        raise DataFormatError(f"split {split!r} has no rows")
    first = rows[0]

    def specs(prefix: str) -> list[str]:
        keys = sorted(
            (k for k in first if k.startswith(prefix)), key=lambda k: int(k.rsplit("_", 1)[1])
        )
        return [first[k] for k in keys if isinstance(first[k], str) and first[k].strip()]

    safety, behavioral = parse_specifications(
        {
            "safety_specifications": specs("safety_spec_"),
            "behavioral_specifications": specs("behavioral_spec_"),
        },
        f"hub split {split!r}",
    )
    name = str(first.get("scenario") or split)
    items = parse_prompts(rows, name, f"hub split {split!r}")
    return Scenario(
        name=name,
        title=name,
        description=str(first.get("scenario_description", "")),
        safety_specs=safety,
        behavioral_specs=behavioral,
        items=items,
    )


def load_scenario_hf(path_or_repo: str, split: str) -> Scenario:
    """Load one scenario split of the hub mirror (``zzzhr97/SpecBench``) or a local copy of it.

    ``path_or_repo`` is a local folder of parquet/arrow/json files (one file per split, named
    like the split) or a hub id (needs network access).
    """
    import datasets

    p = Path(path_or_repo)
    if p.is_dir():
        files = [f for f in p.rglob("*") if f.is_file() and f.stem.split("-")[0] == split]
        if not files:
            raise DataFormatError(f"no file for split {split!r} under {p}")
        f = files[0]
        kind = {".parquet": "parquet", ".arrow": "arrow", ".json": "json", ".jsonl": "json"}.get(
            f.suffix
        )
        if kind is None:
            raise DataFormatError(f"{f}: unsupported file type {f.suffix!r}")
        ds = datasets.load_dataset(kind, data_files=str(f), split="train")
    else:
        ds = datasets.load_dataset(path_or_repo, split=split)
    return scenario_from_rows([dict(r) for r in ds], split)


def convert_hf_dir(src: str | Path, out_dir: str | Path) -> list[str]:
    """Convert a local hub-format folder (one file per scenario split) to the official layout."""
    names = []
    for split in SCENARIOS:
        try:
            s = load_scenario_hf(str(src), split)
        except DataFormatError:
            continue
        s.name = split
        write_scenario(s, out_dir)
        names.append(split)
    if not names:
        raise DataFormatError(f"{src}: found none of the splits {', '.join(SCENARIOS)}")
    return names
