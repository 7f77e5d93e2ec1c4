"""Bad input fails early with the offending value named; rewards never raise."""

from __future__ import annotations

import random

import pytest
from compgen_rl.data import SplitConfig, build_rows
from compgen_rl.errors import CompgenError, InfeasibleSplitError, UnknownModuleError
from compgen_rl.hlsm import Program, execute, sample_program
from compgen_rl.modules import Inventory, get_inventory


def test_unknown_codes_and_modules():
    with pytest.raises(UnknownModuleError, match="k99"):
        get_inventory("tiny").decode("k99")
    with pytest.raises(UnknownModuleError, match="'nope'"):
        Program((("chain", "nope"),))
    with pytest.raises(UnknownModuleError, match="'warp'"):
        Program((("warp", "rev"),))
    with pytest.raises(UnknownModuleError, match="unknown inventory 'huge'"):
        SplitConfig(inventory="huge")
    with pytest.raises(KeyError):  # also a KeyError for callers that expect one
        get_inventory("huge")


def test_routing_invalid_at_step_one():
    with pytest.raises(CompgenError, match=r"'skip'.*invalid before step 2"):
        Program((("skip", "rev"),))


def test_depths():
    with pytest.raises(CompgenError, match="depth_ood=3 must be > depth_train=3"):
        SplitConfig(depth_train=3, depth_ood=3)
    with pytest.raises(CompgenError, match="depth_train must be >= 1"):
        SplitConfig(depth_train=0, depth_ood=1)
    with pytest.raises(CompgenError, match="depth >= 1"):
        Program(())
    with pytest.raises(CompgenError, match="depth must be >= 1"):
        sample_program(random.Random(0), "tiny", 0)


@pytest.mark.parametrize("routing", ["splice", "head"])
def test_odd_length_for_halving_routings(routing):
    steps = (("chain", "rev"), (routing, "rev")) if routing == "splice" else ((routing, "rev"),)
    with pytest.raises(CompgenError, match=f"'{routing}'.*odd length 5"):
        execute(Program(steps), "abcde")


def test_output_over_max_len_is_rejected_not_truncated():
    p = Program(
        (("chain", "mirror_str"), ("chain", "mirror_str"), ("chain", "mirror_str")), "fgx25"
    )
    with pytest.raises(CompgenError, match="80 characters > max_len=64"):
        execute(p, "abcdefghij")


def test_empty_alphabet_and_reserved_characters():
    with pytest.raises(CompgenError, match="empty alphabet"):
        Inventory("x", ("rev",), ("chain",), "")
    with pytest.raises(CompgenError, match="reserved"):
        Inventory("x", ("rev",), ("chain",), "ab=")


def test_infeasible_splits_state_counts():
    with pytest.raises(InfeasibleSplitError, match="n_sig_test=100 but only 36"):
        build_rows(SplitConfig.routing_context_cpu(n_sig_test=100, n_sft=10))
    with pytest.raises(InfeasibleSplitError, match="coverage impossible"):
        build_rows(
            SplitConfig(
                inventory="fgx25", strategy="routing_context", depth_train=2, depth_ood=3, n_sft=10
            )
        )
    with pytest.raises(
        InfeasibleSplitError, match=r"288 depth-2 signatures cannot give 200 RL \+ 100 test"
    ):
        build_rows(
            SplitConfig(
                strategy="random",
                depth_train=2,
                depth_ood=3,
                input_len=4,
                n_sig_rl=200,
                n_sig_test=100,
                n_sft=10,
            )
        )


def test_num_generations_must_divide_batch():
    from compgen_rl.train import GRPOArgs, grpo_config

    with pytest.raises(CompgenError, match="num_generations=8 does not divide the batch of 30"):
        grpo_config(GRPOArgs(), batch_size=30)
    with pytest.raises(CompgenError, match="num_generations=1"):
        GRPOArgs(num_generations=1)


def test_vllm_on_cpu_refused():
    from compgen_rl.train import GRPOArgs, grpo_config

    with pytest.raises(CompgenError, match="use_vllm=True needs a GPU"):
        grpo_config(GRPOArgs(use_vllm=True))


def test_unencodable_alphabet_and_overlong_prompts():
    from compgen_rl.evaluate import check_prompt_fit

    from llmcore.zoo import word_tokenizer

    tok = word_tokenizer(["x=ab", "p=r0.k0"])
    with pytest.raises(CompgenError, match="cannot encode"):
        check_prompt_fit(tok, ["x=zz p=r0.k0\n"], 64, 8)
    from llmcore.zoo import train_bpe_tokenizer

    bpe = train_bpe_tokenizer(["x=abcd p=r0.k0\n"], 264)
    with pytest.raises(CompgenError, match="exceed the model context of 16"):
        check_prompt_fit(bpe, ["x=abcd p=r0.k0 r1.k1\n"], 16, 28)


def test_rewards_never_raise_on_hostile_input():
    from compgen_rl.rewards import exact_match_reward, step_accuracy

    weird = [None, 1.5, {"content": 3}, ["a", 2], b"ans=x", "ans=" + "x" * 10_000]
    assert exact_match_reward(weird, ["x"] * len(weird)) == [0.0] * len(weird)
    assert step_accuracy(weird, ["{}"] * len(weird), input=[None] * len(weird)) == [0.0] * len(
        weird
    )
    assert exact_match_reward(["ans=x"], []) == [0.0]


def test_grpo_refuses_fewer_prompts_than_a_step():
    from compgen_rl.train import GRPOArgs, run_grpo

    with pytest.raises(CompgenError, match=r"1 RL prompt.*fewer than prompts_per_step=8"):
        run_grpo(
            None, None, [{"prompt": "x", "answer": "y", "program": "{}", "input": "x"}], GRPOArgs()
        )
