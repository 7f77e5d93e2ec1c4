from __future__ import annotations

import json
from pathlib import Path

import pytest
from spec_align.data import (
    SCENARIOS,
    load_scenario,
    load_scenario_hf,
    scenario_from_rows,
    validate_dir,
    write_scenario,
)
from spec_align.errors import DataFormatError, SpecFormatError
from spec_align.synth import make_synthetic_scenario

COUNTS = {
    "Biochem": (11, 9),
    "Child": (12, 10),
    "Code": (11, 10),
    "Health": (9, 10),
    "Travel": (10, 11),
}


def test_vendored_official_specs_are_the_103():
    total = 0
    for name in SCENARIOS:
        s = load_scenario(name, specs_only=True)
        assert (len(s.safety_specs), len(s.behavioral_specs)) == COUNTS[name]
        # The last behavioral spec is the helpfulness spec in every scenario.
        assert "greatest extent possible" in s.behavioral_specs[-1]
        total += s.n_specs
    assert total == 103
    assert load_scenario("Child", specs_only=True).title == "Child-Oriented Storytelling Generation"


def test_prompts_are_not_shipped():
    with pytest.raises(DataFormatError, match="not shipped"):
        load_scenario("Health")


def _official(tmp: Path, items: list[dict], specs: dict | None = None) -> Path:
    d = tmp / "Demo"
    d.mkdir(parents=True)
    (d / "scenario.json").write_text(json.dumps({"name": "Demo scenario", "description": "x"}))
    (d / "specifications.json").write_text(
        json.dumps(
            specs
            or {
                "safety_specifications": ["no harm"],
                "behavioral_specifications": ["be brief", "help"],
            }
        )
    )
    (d / "prompts.json").write_text(json.dumps(items))
    return tmp


ITEM = {
    "adversarial_prompt": "attack q",
    "prompt": "q",
    "label": "unsafe",
    "source": "GPT",
    "answer": "",
}


def test_official_layout_roundtrip(tmp_path):
    base = _official(
        tmp_path,
        [
            ITEM,
            {**ITEM, "label": "safe", "adversarial_prompt": "q2", "prompt": "q2", "answer": "42"},
        ],
    )
    s = load_scenario("Demo", base)
    assert [it.id for it in s.items] == ["Demo-0", "Demo-1"]
    assert s.items[0].adversarial_prompt == "attack q" and s.items[1].answer == "42"
    assert validate_dir(base)["Demo"] == {
        "safety_specs": 1,
        "behavioral_specs": 2,
        "prompts": 2,
        "unsafe": 1,
        "safe": 1,
    }


def test_synthetic_write_and_load_keeps_rules(tmp_path):
    s = make_synthetic_scenario(5, 4, 4)
    write_scenario(s, tmp_path)
    t = load_scenario(s.name, tmp_path)
    assert t.safety_specs == s.safety_specs and t.rules.to_json() == s.rules.to_json()
    assert [i.to_official() for i in t.items] == [i.to_official() for i in s.items]


def test_hub_flattened_columns(tmp_path):
    s = load_scenario("Travel", specs_only=True)
    rows = []
    for lab in ("unsafe", "safe"):
        row = {
            "adversarial_prompt": f"a-{lab}",
            "prompt": f"p-{lab}",
            "label": lab,
            "source": "GPT",
            "answer": "",
            "scenario": "Travel",
            "scenario_description": s.description,
        }
        row |= {
            f"safety_spec_{i}": (s.safety_specs[i - 1] if i <= 10 else "") for i in range(1, 13)
        }
        row |= {f"behavioral_spec_{i}": s.behavioral_specs[i - 1] for i in range(1, 12)}
        rows.append(row)
    t = scenario_from_rows(rows, "Travel")
    assert t.safety_specs == s.safety_specs and t.behavioral_specs == s.behavioral_specs
    import datasets

    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "Travel-00000.parquet"))
    u = load_scenario_hf(str(tmp_path), "Travel")
    assert [i.label for i in u.items] == ["unsafe", "safe"]
    assert u.safety_specs == s.safety_specs


@pytest.mark.parametrize(
    ("specs", "match"),
    [
        ({"safety_specifications": ["a"]}, "behavioral_specifications"),
        ({"safety_specifications": [], "behavioral_specifications": ["b"]}, "non-empty list"),
        (
            {"safety_specifications": ["a", 3], "behavioral_specifications": ["b"]},
            r"safety_specifications\[1\]",
        ),
    ],
)
def test_bad_specifications(tmp_path, specs, match):
    base = _official(tmp_path, [ITEM], specs)
    with pytest.raises(SpecFormatError, match=match):
        load_scenario("Demo", base)


def test_bad_prompts(tmp_path):
    base = _official(tmp_path, [ITEM, {**ITEM, "label": "maybe"}])
    with pytest.raises(DataFormatError, match="item 1 has label 'maybe'"):
        load_scenario("Demo", base)
    base2 = _official(
        tmp_path / "b", [{k: v for k, v in ITEM.items() if k != "adversarial_prompt"}]
    )
    with pytest.raises(DataFormatError, match="item 0 has no 'adversarial_prompt'"):
        load_scenario("Demo", base2)
    assert load_scenario("Demo", base2, adversarial=False).items[0].adversarial_prompt == "q"


def test_unknown_scenario_lists_valid_names():
    with pytest.raises(ValueError, match="valid names: Biochem, Child, Code, Health, Travel"):
        load_scenario("Finance", specs_only=True)
