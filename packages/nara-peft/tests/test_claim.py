"""Paper claim on the synthetic noise-regime task: a noise-aware update beats static LoRA at
(near-)equal trainable parameters, and the gain comes from conditioning on lambda.

Margins (fixed before the runs): for each seed, CE(NaRA r4) < CE(LoRA r6) - 0.05 and
CE(NaRA r4) < CE(NaRA-constant r4). Calibration run (this code, 2 cores, torch 2.14):
mean CE over t in {0.1, 0.3, 0.7, 0.9} -- seed 0: NaRA r4 0.457, LoRA r6 0.540, LoRA r4 0.565,
NaRA-const r4 0.565; seed 1: 0.454 / 0.553 / 0.581 / 0.576.

Tiers: seed 0 with the three compared arms runs in the default tier (about 1 minute of one
core); seed 1 with every arm (LoRA r4 too) in the extended tier.

Two cold builds of the pre-trained tiny model (empty cache, LLMCORE_ZOO_THREADS=1 and 2) gave
byte-identical weights (sha256 69daf5ac...; hidden 64 is too small for the BLAS to split a
reduction across threads), so the spread between builds is 0. Measured on both builds:
seed 0: NaRA r4 0.4636, LoRA r6 0.5528, NaRA-const r4 0.5688 -> margins 0.039 (vs LoRA r6 -
0.05) and 0.105 (vs NaRA-const); seed 1: 0.4647 / 0.5576 / 0.5791 (LoRA r4 0.5872) -> margins
0.043 and 0.114.
"""

from __future__ import annotations

import json
import os

import pytest
import torch
from nara_peft.synth import (
    ARM_PARAMS,
    SynthSpec,
    make_arm,
    pretrained_tiny,
    run_experiment,
    train_arm,
)

CLAIM_ARMS = ("lora_r6", "nara_const_r4", "nara_r4")


def _assert_claim(seeds: tuple[int, ...], arms: tuple[str, ...], tmp_path) -> None:
    torch.set_num_threads(1)
    spec = SynthSpec(arms=arms)
    report = run_experiment(seeds, spec, results_path=tmp_path / "rows.jsonl")
    out = os.environ.get("NARA_CLAIM_REPORT", str(tmp_path / "claim_report.json"))
    with open(out, "w") as f:
        json.dump(report, f, indent=2)
    for row in report["rows"]:
        assert row["trainable_params"] == ARM_PARAMS[row["arm"]]
        assert row["final_loss"] < row["first_loss"]
    for seed, ce in report["mean_ce"].items():
        assert ce["nara_r4"] < ce["lora_r6"] - 0.05, (seed, ce)
        assert ce["nara_r4"] < ce["nara_const_r4"], (seed, ce)
    # NaRA's parameter overhead over LoRA r6 is ~1 % (6,224 vs 6,144)
    assert abs(ARM_PARAMS["nara_r4"] / ARM_PARAMS["lora_r6"] - 1) < 0.02


@pytest.mark.claim
@pytest.mark.slow
def test_nara_beats_lora_at_matched_params(tmp_path):
    """Default tier: seed 0, the three arms the claim compares (LoRA r4 is reported only)."""
    _assert_claim((0,), CLAIM_ARMS, tmp_path)


@pytest.mark.claim
@pytest.mark.extended
def test_nara_beats_lora_second_seed_all_arms(tmp_path):
    """Extended tier: seed 1 with every arm, LoRA r4 included (the full protocol)."""
    _assert_claim((1,), SynthSpec().arms, tmp_path)


def test_smoke_training_decreases_loss():
    """100-step variant: NaRA trains and its loss goes down (LoRA is covered by the claim)."""
    torch.set_num_threads(1)
    spec = SynthSpec()
    base = pretrained_tiny(spec)
    for arm in ("nara_r4",):
        model, takes = make_arm(arm, base, spec, seed=0)
        losses = train_arm(model, takes, spec, seed=0, steps=100)
        assert sum(losses[-10:]) / 10 < sum(losses[:10]) / 10 - 0.1, arm
