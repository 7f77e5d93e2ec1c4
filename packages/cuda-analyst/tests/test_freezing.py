"""Freezing and frozen replay (exactness): parents without children are skipped, the frozen
prompt plus the recorded seed reproduces the reference child, every mask sees the same
pre-injection prompt, and a fixed mock seed gives identical records."""

from __future__ import annotations

import hashlib
import json

import pytest
from cuda_analyst.evaluator import Evaluator
from cuda_analyst.intervene import intervene
from cuda_analyst.llm import MockLLM
from cuda_analyst.masks import coalition_masks
from cuda_analyst.prompting import extract_code
from cuda_analyst.tasks import get_task
from cuda_analyst.trajectory import (
    evolve,
    generate_with_retries,
    group_openevolve_by_gen,
    load_frozen,
)


@pytest.fixture(scope="module")
def frozen(tmp_path_factory, cbackend, eval_cache):
    root = tmp_path_factory.mktemp("fz")
    ev = Evaluator(get_task("reduce_sum"), cbackend, cache=eval_cache)
    evolve(ev, MockLLM("strong", 3), root / "run", generations=3, population=3, children=2, seed=3)
    group_openevolve_by_gen(root / "run" / "checkpoints", root / "frozen")
    return root, ev


def test_parents_without_children_are_skipped(frozen):
    root, _ = frozen
    progs = [json.loads(p.read_text()) for p in (root / "run/checkpoints/programs").glob("*.json")]
    parents = {p["parent_id"] for p in progs if p["parent_id"]}
    samples = load_frozen(root / "frozen")
    assert {s["id"] for s in samples} == parents
    assert len(samples) == sum(1 for p in progs if p["parent_id"])  # one per child prompt
    assert any(p["id"] not in parents for p in progs)


def test_frozen_prompt_reproduces_reference_children(frozen):
    root, _ = frozen
    llm = MockLLM("strong", 3)
    for s in load_frozen(root / "frozen"):
        texts, _ = generate_with_retries(
            llm, s["prompts"]["system"] + "\n\n" + s["prompts"]["user"], 1, s["sampling_seed"]
        )
        assert (extract_code(texts[0]) or "") == s["child_code"]


def test_masks_share_pre_injection_prompts_and_seeded_records_repeat(frozen, tmp_path):
    root, ev = frozen
    masks = [str(m) for m in coalition_masks()]
    a = intervene(
        root / "frozen",
        masks,
        MockLLM("strong", 0),
        ev,
        num_run=2,
        num_trials=3,
        out_dir=tmp_path / "a",
    )
    b = intervene(
        root / "frozen",
        masks,
        MockLLM("strong", 0),
        ev,
        num_run=2,
        num_trials=3,
        out_dir=tmp_path / "b",
    )
    assert a == b
    from llmcore.data import read_jsonl

    hashes = {}
    for m in masks:
        for r in read_jsonl(tmp_path / "a" / m / "records.jsonl"):
            pre = r["prompt"].replace(r["decision"] + "\n", "") if r["decision"] else r["prompt"]
            hashes.setdefault(r["id"], set()).add(hashlib.sha256(pre.encode()).hexdigest())
        ra = [
            json.dumps(x, sort_keys=True) for x in read_jsonl(tmp_path / "a" / m / "records.jsonl")
        ]
        rb = [
            json.dumps(x, sort_keys=True) for x in read_jsonl(tmp_path / "b" / m / "records.jsonl")
        ]
        assert ra == rb
    assert all(len(h) == 1 for h in hashes.values())
    # resume: a third call on the same folder reads the records instead of sampling
    llm = MockLLM("strong", 0)
    c = intervene(root / "frozen", masks, llm, ev, num_run=2, num_trials=3, out_dir=tmp_path / "a")
    assert c == a and llm.calls == 0
