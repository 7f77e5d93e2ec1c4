"""Extended (opt-in): RL-data ablations D2 (compound vs atomic), D3 (disjoint vs overlap),
D4 (RL vs RFT, report only), D1 on the position-holdout split over three seeds (report only),
lm-eval tasks. Results and commands are in the README."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.extended


@pytest.fixture(scope="module")
def protocol(tmp_path_factory):
    from compgen_rl.train import ProtocolConfig, run_protocol

    out = tmp_path_factory.mktemp("protocol") / "protocol.json"
    rep = run_protocol(
        ProtocolConfig(arms=("sft", "sft_rl", "sft_rft", "rl_atomic", "rl_overlap"), out=str(out))
    )
    print(json.dumps({a: {s: m[s]["acc"] for s in ("test_seen", "test_unseen", "test_ood")}
                      for a, m in rep["arms"].items()}))  # fmt: skip
    return rep


def test_d2_compound_beats_atomic_on_ood(protocol):
    a = protocol["arms"]
    assert a["sft_rl"]["test_ood"]["acc"] > a["rl_atomic"]["test_ood"]["acc"], a


def test_d3_disjoint_at_least_overlap_on_unseen(protocol):
    a = protocol["arms"]
    assert a["sft_rl"]["test_unseen"]["acc"] >= a["rl_overlap"]["test_unseen"]["acc"], a


def test_d4_rl_vs_rft_recorded(protocol):
    a = protocol["arms"]
    assert {"sft_rl", "sft_rft"} <= set(a)
    print(
        "D4 unseen: RL",
        a["sft_rl"]["test_unseen"]["acc"],
        "RFT",
        a["sft_rft"]["test_unseen"]["acc"],
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_d1_position_holdout_report_only(seed):
    """The original split (skill x position held out, L_train 3, length-6 inputs): report only.

    Seed 0 (500 + 500 prompts): SFT seen 0.640 / unseen 0.204; after GRPO seen 0.652, unseen
    0.228 (+0.024, clustered SE 0.010), unseen step accuracy 0.391 -> 0.387; the prefilter kept
    224 of 1,000 RL prompts. Below D1's +0.05 unseen margin. Seeds 1 and 2 not measured."""
    from compgen_rl.data import SplitConfig
    from compgen_rl.evaluate import evaluate, paired_gain
    from compgen_rl.tiny import CLAIM_GRPO, build_rl_arm, build_sft, split_rows
    from compgen_rl.train import GRPOArgs

    cfg = SplitConfig(
        strategy="position_holdout",
        depth_train=3,
        depth_ood=4,
        input_len=6,
        n_sft=80_000,
        seed=seed,
    )
    # 70-character documents and 41-character completions: a 96-position model, longer rollouts
    sft = build_sft(
        cfg, seen_min=0.0, unseen_window=None, name="compgen-rl-sft-posholdout", context=96
    )
    rl = build_rl_arm(sft, cfg, GRPOArgs(**{**CLAIM_GRPO, "max_completion_length": 48}))
    rows, _ = split_rows(cfg)
    res = {n: {s: evaluate(*e.load(), rows[s], return_rows=True) for s in ("test_seen", "test_unseen")}
           for n, e in (("sft", sft), ("sft_rl", rl))}  # fmt: skip
    out = {f"{n}_{s}": r[s]["acc"] for n, r in res.items() for s in r}
    for s in ("test_seen", "test_unseen"):
        a, b = res["sft"][s], res["sft_rl"][s]
        out[f"gain_{s}"] = paired_gain(a["correct"], b["correct"], a["signature"])
    out["step_unseen"] = (
        res["sft"]["test_unseen"]["step_acc"],
        res["sft_rl"]["test_unseen"]["step_acc"],
    )
    out["prefilter_kept"] = rl.metrics.get("prefilter_kept")
    out["frac_reward_zero_std"] = (rl.metrics.get("frac_reward_zero_std_first"),
                                   rl.metrics.get("frac_reward_zero_std_last"))  # fmt: skip
    print("D1 position_holdout seed", seed, out)


def test_lmeval_tasks(tmp_path, tiny_model):
    pytest.importorskip("lm_eval")
    from compgen_rl.cli import main
    from compgen_rl.lmeval_tasks import write_tasks

    from llmcore import lmeval

    data = tmp_path / "data"
    assert main(["make-data", "--strategy", "routing_context", "--depth-train", "2", "--depth-ood", "3",
                 "--input-len", "4", "--n-sft", "16", "--n-test", "4", "--n-ood", "4", "--out", str(data)]) == 0  # fmt: skip
    write_tasks(data, tmp_path / "tasks")
    model, tok, _ = tiny_model
    out = lmeval.evaluate_model(model, tok, ["compgen_unseen"], include_path=str(tmp_path / "tasks"), limit=2,
                                gen_kwargs={"max_gen_toks": 8})  # fmt: skip
    assert "compgen_unseen" in lmeval.scores(out)
