"""Extended (opt-in): RL-data ablations D2 (compound vs atomic), D3 (disjoint vs overlap),
D4 (RL vs RFT, report only), D1 on the position-holdout split over three seeds (report only),
lm-eval tasks. Results and commands are in the README."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.extended


def _sft_on_docs(cfg, docs, rows, *, name, corpus, description, gate_splits, gate_label,
                 max_new_tokens, **sft_kw):  # fmt: skip
    """A zoo-cached SFT model of the claim's shape on custom documents; its gates only record
    greedy accuracy on the first 200 rows of each of ``gate_splits``."""
    from dataclasses import replace

    import compgen_rl.hlsm
    import compgen_rl.modules
    from compgen_rl.tiny import _answer_match, sft_recipe

    from llmcore import zoo
    from llmcore.zoo.train import completion_loss

    base = sft_recipe(cfg, name=name, **sft_kw)
    recipe = replace(base, corpus=zoo.Corpus(corpus, tuple(docs), base.corpus.eval),
                     description=description)  # fmt: skip
    tok = zoo.recipe_tokenizer(recipe)
    newline = tok.convert_tokens_to_ids(tok.tokenize("\n"))[0]
    gates = [zoo.accuracy_gate([r["prompt"] for r in rows[s][:200]], [r["answer"] for r in rows[s][:200]],
                               max_new_tokens=max_new_tokens, match=_answer_match, name=f"gate_{s}_acc")
             for s in gate_splits]  # fmt: skip
    return zoo.build(
        recipe,
        progress=True,
        loss_fn=completion_loss(newline),
        gate=lambda m, t: {k: v for g in gates for k, v in g(m, t).items()},
        key_extra={"loss": "completion after the first newline", "gate": gate_label,
                   "code": zoo.code_digest(compgen_rl.hlsm, compgen_rl.modules)},
    )  # fmt: skip


def _compound_and_atomic_arms(sft, cfg, atomic_cfg, grpo):
    """The claim arm's prefilter + GRPO from ``sft`` on compound and on atomic RL data; an arm
    whose prefilter keeps less than one step of prompts stays the SFT model. Returns
    ``(arms, train stats)``."""
    from compgen_rl.errors import CompgenError
    from compgen_rl.tiny import build_rl_arm

    arms, train = {"sft": sft}, {}
    for name, c in (("compound", cfg), ("atomic", atomic_cfg)):
        try:
            arms[name] = build_rl_arm(sft, c, grpo)
            train[name] = {
                k: v for k, v in arms[name].metrics.items() if "prefilter" in k or "zero_std" in k
            }
        except CompgenError as exc:  # the prefilter kept less than one step of prompts
            arms[name], train[name] = sft, {"skipped": str(exc)[:120]}
    return arms, train


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

    from compgen_rl.evaluate import evaluate
    from compgen_rl.tiny import CLAIM_GRPO, claim_split, split_rows
    from compgen_rl.train import GRPOArgs

    cfg = claim_split()
    rows, _ = split_rows(cfg)
    n1 = cfg.n_sft // 5
    atomic_cfg = replace(cfg, rl_data="atomic")
    d1 = split_rows(replace(atomic_cfg, n_rl=cfg.n_rl + n1))[0]["rl"]
    assert d1[: cfg.n_rl] == split_rows(atomic_cfg)[0]["rl"]  # the RL prompts come first
    docs = [r["prompt"] + r["completion"] for r in rows["sft"][: cfg.n_sft - n1] + d1[cfg.n_rl :]]
    random.Random(0).shuffle(docs)
    sft = _sft_on_docs(
        cfg, docs, rows, name="compgen-rl-sft-mixdepth",
        corpus="compgen-tiny-routing_context-mixdepth-s0",
        description="2x128 Llama SFT on depth-1 (20 %) and depth-2 traces of the routing-context split",
        gate_splits=("test_seen", "probe_atomic"), gate_label="records seen/probe acc",
        max_new_tokens=40,
    )  # fmt: skip
    arms, train = _compound_and_atomic_arms(sft, cfg, atomic_cfg, GRPOArgs(**CLAIM_GRPO))
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


@pytest.mark.parametrize("grpo_seed", [0, 1, 2])
def test_d2_depth3_sft_compound_beats_atomic_on_depth4_ood(grpo_seed):
    """D2 with depth-3 traces in SFT and OOD at depth 4 (extended tier).

    Per-depth accuracy of the claim arms (greedy, seed 0): depth 1 (1,008 probes) 0.000 for SFT
    and SFT->RL, depth 2 seen 0.936 / 0.934 and unseen 0.426 / 0.488, depth 3 (500 OOD prompts)
    0.000 / 0.000 with step accuracy 0.000, and 0 of 500 depth-3 prompts solved in 8 samples at
    T 1.0. The depth-2-only model writes two steps for every prompt and garbles ``h1`` on longer
    programs, so no OOD depth is reachable from it. This try trains SFT on three depths so that
    OOD is the next depth, as in the paper (OOD at L 4 after training at L 3).

    Recipe (fixed before measuring): the routing-context CPU split (seed 0; RL prompts, seen and
    unseen tests and depth-1 probes from it). Depth-3 signatures (all feasible ones) without a
    held-out event are shuffled with ``random.Random(3)``; a fifth is reserved (never in SFT:
    the ``d3_unseen`` report set), the rest are SFT signatures; depth-3 signatures with exactly
    one held-out event (at step 2) form the ``d3_heldout`` report set. SFT documents (96,000,
    shuffled with seed 0): 19,200 depth-1 traces (20 %; atomic rows drawn after the 1,000 atomic
    RL prompts), 38,400 depth-2 traces (the claim split's first SFT rows), 38,400 depth-3 traces
    on the SFT depth-3 signatures (fresh length-4 inputs). Model and optimiser as the claim's SFT
    (2 x 128 Llama) but 96 positions and 1,500 steps x 64 (one pass), lr 1e-3 cosine, zoo name
    ``compgen-rl-sft-depth123``; its gates only record accuracy. Then the claim arm's prefilter
    + GRPO (8 x 8, lr 2e-5, 60 steps, same sample budget) on ``compound`` (depth-2 C_RL) and on
    ``atomic`` (depth-1) RL data; an arm whose prefilter keeps fewer than one step of prompts
    stays the SFT model. OOD: 500 depth-4 prompts on 64 depth-4 signatures
    (``claim_split(depth_ood=4, n_ood=500)``). Evaluated greedily on seen, unseen (500 each),
    the 120 depth-1 probes, ``d3_unseen`` and ``d3_heldout`` (500 each, report only) and OOD.
    Asserted (claim D2): acc_ood(compound) > acc_ood(atomic) at depth 4.

    Measured (GRPO seed 0; accuracy, step accuracy in brackets; 11 min 07 s wall, 563 CPU s, SFT
    training 499 s, at load about 2.5): SFT gate on 200 prompts seen 0.87, depth-1 probes 1.00,
    ``d3_unseen`` 0.55.

    ======== ============= ============= ====== ============= ============= =============
    arm      seen          unseen        probes d3_unseen     d3_heldout    OOD depth 4
    ======== ============= ============= ====== ============= ============= =============
    SFT      0.844 (0.922) 0.288 (0.644) 1.000  0.526 (0.800) 0.474 (0.587) 0.134 (0.088)
    compound 0.830 (0.914) 0.380 (0.689) 1.000  0.502 (0.787) 0.464 (0.596) 0.134 (0.077)
    atomic   0.838 (0.919) 0.278 (0.639) 1.000  0.516 (0.800) 0.462 (0.587) 0.130 (0.086)
    ======== ============= ============= ====== ============= ============= =============

    Prefilter: compound kept 308 of 1,000 (614 never solved, 78 always), zero-std groups 0.25 ->
    0.625; atomic kept 108 (892 always solved), zero-std groups 0.75 -> 1.0 (mean 0.86). Depth 4
    is reachable now (0.13 for every arm), so D2 is decidable, and the assertion holds: 0.134 >
    0.130. The difference is 2 of 500 prompts, compound - atomic +0.004 (paired SE 0.011, SE
    clustered by the 64 OOD signatures 0.009): no measurable effect, and compound RL leaves OOD
    accuracy where SFT had it (0.134) while raising depth-2 unseen accuracy by +0.092. On the
    depth-3 report sets compound - atomic is -0.014 (SE 0.011, ``d3_unseen``) and +0.002 (SE
    0.012, ``d3_heldout``). The paper's +27.8-point compound advantage is not reproduced.

    What the depth-4 accuracy measures (greedy outputs of the seed-0 arms, 500 OOD prompts): no
    arm writes an ``h4`` line; every completion has three steps and an answer. Correct answers
    come from programs whose answer does not need all four steps: last routing ``recall`` (reads
    h0; 172 prompts) SFT 0.203 / compound 0.203 / atomic 0.186, ``skip`` (reads h2; 153) 0.150
    for all three, ``chain`` (55) 0.055 / 0.091 / 0.055, ``splice`` (120) 0.050 / 0.033 / 0.058.
    So OOD depth 4 is reachable only through such shortcuts, not by running four steps.

    Replicates (recipe fixed before they were run): the same SFT model; prefilter and GRPO seed
    (``GRPOArgs.seed``) 1 and 2 for both RL arms, otherwise as above; the same assertion.
    Seed 1: compound seen 0.824, unseen 0.386, OOD 0.136; atomic seen 0.832, unseen 0.292, OOD
    0.118; compound - atomic on OOD +0.018 (SE 0.013, clustered 0.014); kept 292 / 98. Seed 2:
    compound seen 0.818, unseen 0.376, OOD 0.128; atomic seen 0.834, unseen 0.276, OOD 0.126;
    +0.002 (SE 0.012, clustered 0.012); kept 299 / 111. Both pass (3 of 3 seeds, mean +0.008),
    each by less than 1.5 SE; compound RL leaves OOD accuracy where the SFT model had it (0.134
    -> 0.134, 0.136, 0.128), atomic RL lowers it slightly (0.130, 0.118, 0.126). 4 min 10 s wall,
    250 CPU s for the three parameters (seed 0 cached)."""
    import random
    from dataclasses import replace

    from compgen_rl.data import _draw, _events, signatures
    from compgen_rl.evaluate import evaluate, paired_gain
    from compgen_rl.tiny import CLAIM_GRPO, claim_split, split_rows
    from compgen_rl.train import GRPOArgs

    cfg = claim_split()
    rows, meta = split_rows(cfg)
    rows = dict(rows)
    inv = cfg.resolved_inventory()
    held = set(meta["heldout_events"])
    d3 = signatures(inv, 3)
    free = [s for s in d3 if not any(e in held for e in _events(s))]
    one = sorted(s for s in d3 if sum(e in held for e in _events(s)) == 1)
    rng = random.Random(3)
    rng.shuffle(free)
    reserve, sft3 = sorted(free[: len(free) // 5]), sorted(free[len(free) // 5 :])
    n_sft, n1 = 96_000, 19_200
    n3 = (n_sft - n1) // 2
    d3_sft = _draw(sft3, n3, inv, rng, "plain", "sft", {})
    rows["d3_unseen"] = _draw(reserve, 500, inv, rng, "plain", "d3_unseen", {})
    rows["d3_heldout"] = _draw(one, 500, inv, rng, "plain", "d3_heldout", {})
    rows["ood4"] = split_rows(claim_split(depth_ood=4, n_ood=500))[0]["test_ood"]
    assert {r["depth"] for r in rows["ood4"]} == {4}
    atomic_cfg = replace(cfg, rl_data="atomic")
    d1 = split_rows(replace(atomic_cfg, n_rl=cfg.n_rl + n1))[0]["rl"]
    assert d1[: cfg.n_rl] == split_rows(atomic_cfg)[0]["rl"]  # the RL prompts come first
    sft_rows = d1[cfg.n_rl :] + rows["sft"][: n_sft - n1 - n3] + d3_sft
    docs = [r["prompt"] + r["completion"] for r in sft_rows]
    assert len(docs) == n_sft
    random.Random(0).shuffle(docs)
    sft = _sft_on_docs(
        cfg, docs, rows, name="compgen-rl-sft-depth123", steps=1500, context=96,
        corpus="compgen-tiny-routing_context-depth123-s0",
        description="2x128 Llama SFT on depth-1 (20 %), depth-2 and depth-3 traces of the routing-context split",
        gate_splits=("test_seen", "probe_atomic", "d3_unseen"), gate_label="records seen/probe/d3 acc",
        max_new_tokens=48,
    )  # fmt: skip
    print("D2 depth-3 SFT built", json.dumps(dict(sft.metrics)), flush=True)
    grpo = GRPOArgs(**{**CLAIM_GRPO, "seed": grpo_seed})
    arms, train = _compound_and_atomic_arms(sft, cfg, atomic_cfg, grpo)
    splits = ("test_seen", "test_unseen", "probe_atomic", "d3_unseen", "d3_heldout", "ood4")
    res = {n: {s: evaluate(*e.load(), rows[s], return_rows=True) for s in splits}
           for n, e in arms.items()}  # fmt: skip
    out = {
        n: {s: (round(r[s]["acc"], 3), round(r[s]["step_acc"], 3)) for s in r}
        for n, r in res.items()
    }
    diff = {s: paired_gain(res["atomic"][s]["correct"], res["compound"][s]["correct"],
                           res["compound"][s]["signature"]) for s in ("d3_unseen", "d3_heldout", "ood4")}  # fmt: skip
    print(
        "D2 depth-3 SFT, GRPO seed",
        grpo_seed,
        json.dumps({"acc_step": out, "compound_minus_atomic": diff, "train": train}),
    )
    assert res["compound"]["ood4"]["acc"] > res["atomic"]["ood4"]["acc"], out
