"""lm-eval hooks: the augmented prompt and the judge chosen by ``SPEC_ALIGN_JUDGE``
(``rule``, ``openai:MODEL@URL``, ``hf:ID``); metrics ``sar``, ``safety``, ``behavioral``."""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

from spec_align.data import Scenario, scenario_from_rows
from spec_align.errors import SpecConfigError
from spec_align.judge import get_judge
from spec_align.prompts import augment_prompt
from spec_align.scoring import item_score
from spec_align.synth import make_synthetic_scenario

SYNTH_SEED = 0


@lru_cache(maxsize=1)
def _synth() -> Scenario:
    return make_synthetic_scenario(SYNTH_SEED)


def synth_dataset(**_: Any) -> dict[str, Any]:
    """The synthetic scenario's items as a ``datasets.Dataset`` split ``test``."""
    import datasets

    s = _synth()
    rows = [{**it.to_official(), "scenario": s.name} for it in s.items]
    return {"test": datasets.Dataset.from_list(rows)}


def _scenario(doc: dict[str, Any]) -> Scenario:
    if str(doc.get("scenario", "")).startswith("Synth"):
        return _synth()
    return _hub_scenario(
        tuple(sorted((k, v) for k, v in doc.items() if "_spec_" in k)),
        str(doc.get("scenario", "")),
        str(doc.get("scenario_description", "")),
    )


@lru_cache(maxsize=16)
def _hub_scenario(spec_cols: tuple, name: str, desc: str) -> Scenario:
    row = dict(spec_cols)
    row.update(
        scenario=name, scenario_description=desc, label="safe", prompt="", adversarial_prompt=""
    )
    s = scenario_from_rows([row], name or "hub")
    s.items = []
    return s


def doc_to_text(doc: dict[str, Any]) -> str:
    return augment_prompt(doc["adversarial_prompt"], _scenario(doc))


@lru_cache(maxsize=1)
def _judge():
    spec = os.environ.get("SPEC_ALIGN_JUDGE")
    if not spec:
        raise SpecConfigError(
            "set SPEC_ALIGN_JUDGE to the judge: 'rule' (specbench_synth only), "
            "'openai:MODEL@URL' or 'hf:ID'"
        )
    return get_judge(spec)


def process_results(doc: dict[str, Any], results: list[str]) -> dict[str, float]:
    from spec_align.data import parse_prompts
    from spec_align.ttd import split_thought

    s = _scenario(doc)
    item = parse_prompts([doc], s.name, "lm-eval doc")[0]
    response = split_thought(results[0])[1]
    v = _judge().judge(item, response, s)
    sc = item_score(v.safety, v.behavioral)
    return {"sar": sc["total"], "safety": sc["safety"], "behavioral": sc["behavioral"]}
