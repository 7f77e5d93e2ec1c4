"""Splits: disjoint signatures, full SFT coverage, held-out events absent from SFT, files
byte-identical per seed."""

from __future__ import annotations

import hashlib

import pytest
from compgen_rl.data import SplitConfig, build_rows, build_splits, check_splits, write_splits
from compgen_rl.errors import SplitCheckError
from compgen_rl.modules import get_inventory
from compgen_rl.theory import coverage, support

SMALL = dict(n_sft=600, n_rl=100, n_test=100, n_ood=50, n_probe=2)


@pytest.mark.parametrize(
    "cfg",
    [
        SplitConfig.routing_context_cpu(**SMALL),
        SplitConfig(strategy="position_holdout", **SMALL),
        SplitConfig(strategy="random", **SMALL),
        SplitConfig(
            inventory="fgx25", strategy="position_holdout", depth_train=2, depth_ood=3, **SMALL
        ),
    ],
    ids=["routing_context", "position_holdout", "random", "fgx25"],
)
def test_split_invariants(cfg):
    rows, meta = build_rows(cfg)
    sigs = meta["signatures"]
    assert not set(sigs["sft"]) & set(sigs["rl"])
    assert not set(sigs["sft"]) & set(sigs["test"])
    assert not set(sigs["rl"]) & set(sigs["test"])
    inv = get_inventory(cfg.inventory)
    assert coverage(rows["sft"], inv) == set(inv.modules)  # full SFT coverage
    assert support(rows["test_seen"]) <= set(sigs["sft"])
    assert support(rows["test_unseen"]) <= set(sigs["test"])
    held = set(meta["heldout_events"])
    key = (lambda e: e.split("/")[0]) if cfg.strategy == "position_holdout" else (lambda e: e)
    for r in rows["sft"]:
        evs = {
            key(f"{s[1]}@{i}/{s[0]}")
            for i, s in enumerate(__import__("json").loads(r["program"])["steps"], 1)
        }
        assert not evs & held
    for r in rows["test_unseen"] + rows["rl"]:
        if cfg.strategy != "random":
            assert r["heldout"] in held
    check_splits(rows)
    dd = build_splits(cfg)
    assert set(dd) == {"sft", "rl", "test_seen", "test_unseen", "test_ood", "probe_atomic"}
    assert {
        "prompt",
        "completion",
        "answer",
        "program",
        "signature",
        "depth",
        "split_tag",
        "modules",
    } <= set(dd["sft"].column_names)


def test_routing_context_recipe_counts():
    _, meta = build_rows(SplitConfig.routing_context_cpu(**SMALL))
    assert {k: len(v) for k, v in meta["signatures"].items() if k != "ood"} == {
        "sft": 216,
        "rl": 36,
        "test": 36,
    }


def test_default_routing_context_avoids_aliased_routings():
    cfg = SplitConfig(strategy="routing_context", depth_train=2, depth_ood=3, input_len=4, **SMALL)
    _, meta = build_rows(cfg)
    assert len(meta["heldout_events"]) == 6
    assert all(e.split("/")[1] in ("chain", "splice") for e in meta["heldout_events"])


def _digest(d):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir())}


def test_files_byte_identical_per_seed(tmp_path):
    cfg = SplitConfig(**SMALL, seed=3)
    write_splits(cfg, tmp_path / "a")
    write_splits(SplitConfig(**SMALL, seed=3), tmp_path / "b")
    write_splits(SplitConfig(**SMALL, seed=4), tmp_path / "c")
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    assert _digest(tmp_path / "a")["sft.jsonl"] != _digest(tmp_path / "c")["sft.jsonl"]


def test_rl_data_variants():
    base = SplitConfig.routing_context_cpu(**SMALL)
    sft_sigs = set(build_rows(base)[1]["signatures"]["sft"])
    over = build_rows(SplitConfig.routing_context_cpu(**SMALL, rl_data="overlap"))[0]["rl"]
    assert support(over) <= sft_sigs
    atomic = build_rows(SplitConfig.routing_context_cpu(**SMALL, rl_data="atomic"))[0]["rl"]
    assert {r["depth"] for r in atomic} == {1}
    check_splits(build_rows(SplitConfig.routing_context_cpu(**SMALL, rl_data="overlap"))[0])


def test_check_splits_catches_leaks():
    rows, _ = build_rows(SplitConfig.routing_context_cpu(**SMALL))
    bad = dict(rows)
    bad["sft"] = rows["sft"] + rows["test_unseen"][:1]
    with pytest.raises(SplitCheckError, match="share"):
        check_splits(bad)
    bad = dict(rows)
    bad["sft"] = [r for r in rows["sft"] if "mirror" not in r["modules"]]
    with pytest.raises(SplitCheckError, match="cover"):
        check_splits(bad)
