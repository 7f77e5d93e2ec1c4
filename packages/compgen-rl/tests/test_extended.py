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
    224 of 1,000 RL prompts. Below D1's +0.05 unseen margin.
    Seed 1: SFT seen 0.806 / unseen 0.252; after GRPO seen 0.788, unseen 0.270 (+0.018, clustered
    SE 0.009), unseen step accuracy 0.388 -> 0.401; prefilter kept 202; frac_reward_zero_std 0.25
    -> 0.50; 10.2 CPU min. Below the margin.
    Seed 2: SFT seen 0.800 / unseen 0.230; after GRPO seen 0.778, unseen 0.284 (+0.054, clustered
    SE 0.012), unseen step accuracy 0.414 -> 0.420; prefilter kept 155; frac_reward_zero_std
    0.125 -> 0.125; 10.4 CPU min. Meets the +0.05 margin, by less than one SE."""
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


def test_d2_mixed_depth_sft_compound_beats_atomic_on_ood():
    """D2 on an SFT model that can write a variable number of steps (extended tier).

    The claim's SFT model saw only depth-2 traces, so depth-1 and depth-3 prompts score 0 for every
    arm and atomic RL prompts are never solved. This try gives the SFT data two depths.

    Recipe (fixed before measuring): the routing-context CPU split (seed 0, L_train 2, OOD depth
    3, length-4 inputs); SFT documents = 64,000 depth-2 traces (the claim split's first 64,000
    SFT rows) + 16,000 depth-1 traces (20 %; atomic rows of the same split drawn after the 1,000
    atomic RL prompts, so no RL prompt row is copied into SFT, though with 12 atomic signatures x
    1,296 inputs many (signature, input) pairs recur), shuffled with seed 0; the claim's SFT
    settings otherwise (2 x 128 Llama, 64 positions, 1,000 steps x 64, lr 1e-3 cosine), zoo name
    ``compgen-rl-sft-mixdepth``, gates only record greedy seen / depth-1 probe accuracy. Then the
    claim arm's prefilter + GRPO (8 x 8, lr 2e-5, 60 steps, same sample budget) on ``compound``
    (depth-2 C_RL) and on ``atomic`` (depth-1) RL data; an arm whose prefilter keeps fewer than one
    step of prompts stays the SFT model. Evaluated greedily on 500 seen, 500 unseen, 300 depth-3
    OOD and 120 depth-1 probe prompts. Asserted: acc_ood(compound) > acc_ood(atomic).

    Measured (seed 0; acc / step acc; 7 min 37 s wall, 443 CPU s, SFT 297 s of it): SFT seen
    0.824 / unseen 0.244 / OOD 0.000 (step 0.000) / depth-1 probes 0.983; compound RL (prefilter
    kept 304 of 1,000, 641 never solved) seen 0.776, unseen 0.358, OOD 0.000 (step 0.000), probes
    0.992; atomic RL (kept 90 of 1,000, 910 always solved, mean pass 0.98; zero-std groups 0.84
    on average) seen 0.826, unseen 0.240, OOD 0.000 (step 0.000), probes 1.000. D2 does not hold:
    the depth-1 traces make atomic prompts reachable, but no arm writes a correct first step on a
    three-module prompt (the SFT model garbles even ``h1`` there: the longer program string is
    itself out of distribution), so OOD depth 3 stays 0 for every arm."""
    import random
    from dataclasses import replace

    import compgen_rl.hlsm
    import compgen_rl.modules
    from compgen_rl.errors import CompgenError
    from compgen_rl.evaluate import evaluate
    from compgen_rl.tiny import (
        CLAIM_GRPO,
        _answer_match,
        build_rl_arm,
        claim_split,
        sft_recipe,
        split_rows,
    )
    from compgen_rl.train import GRPOArgs

    from llmcore import zoo
    from llmcore.zoo.train import completion_loss

    cfg = claim_split()
    rows, _ = split_rows(cfg)
    n1 = cfg.n_sft // 5
    atomic_cfg = replace(cfg, rl_data="atomic")
    d1 = split_rows(replace(atomic_cfg, n_rl=cfg.n_rl + n1))[0]["rl"]
    assert d1[: cfg.n_rl] == split_rows(atomic_cfg)[0]["rl"]  # the RL prompts come first
    docs = [r["prompt"] + r["completion"] for r in rows["sft"][: cfg.n_sft - n1] + d1[cfg.n_rl :]]
    random.Random(0).shuffle(docs)
    base = sft_recipe(cfg, name="compgen-rl-sft-mixdepth")
    recipe = replace(
        base,
        corpus=zoo.Corpus("compgen-tiny-routing_context-mixdepth-s0", tuple(docs), base.corpus.eval),
        description="2x128 Llama SFT on depth-1 (20 %) and depth-2 traces of the routing-context split",
    )  # fmt: skip
    tok = zoo.recipe_tokenizer(recipe)
    newline = tok.convert_tokens_to_ids(tok.tokenize("\n"))[0]
    g = [zoo.accuracy_gate([r["prompt"] for r in rows[s][:200]], [r["answer"] for r in rows[s][:200]],
                           max_new_tokens=40, match=_answer_match, name=f"gate_{s}_acc")
         for s in ("test_seen", "probe_atomic")]  # fmt: skip
    sft = zoo.build(
        recipe,
        progress=True,
        loss_fn=completion_loss(newline),
        gate=lambda m, t: {**g[0](m, t), **g[1](m, t)},
        key_extra={"loss": "completion after the first newline", "gate": "records seen/probe acc",
                   "code": zoo.code_digest(compgen_rl.hlsm, compgen_rl.modules)},
    )  # fmt: skip
    grpo = GRPOArgs(**CLAIM_GRPO)
    arms, train = {"sft": sft}, {}
    for name, c in (("compound", cfg), ("atomic", atomic_cfg)):
        try:
            arms[name] = build_rl_arm(sft, c, grpo)
            train[name] = {
                k: v for k, v in arms[name].metrics.items() if "prefilter" in k or "zero_std" in k
            }
        except CompgenError as exc:  # the prefilter kept less than one step of prompts
            arms[name], train[name] = sft, {"skipped": str(exc)[:120]}
    res = {n: {s: evaluate(*e.load(), rows[s]) for s in ("test_seen", "test_unseen", "test_ood", "probe_atomic")}
           for n, e in arms.items()}  # fmt: skip
    out = {
        n: {s: (round(r[s]["acc"], 3), round(r[s]["step_acc"], 3)) for s in r}
        for n, r in res.items()
    }
    print(
        "D2 mixed-depth SFT",
        json.dumps({"acc_step": out, "train": train, "sft_gate": dict(sft.metrics)}),
    )
    assert res["compound"]["test_ood"]["acc"] > res["atomic"]["test_ood"]["acc"], out
