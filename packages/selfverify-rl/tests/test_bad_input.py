"""Bad input fails early with errors that name the value and the fix; rewards never raise."""

from __future__ import annotations

import re

import pytest
from selfverify_rl.errors import SelfVerifyConfigError, SelfVerifyDataError, UnsupportedTRLError


def test_missing_columns_and_conflicting_answers():
    from selfverify_rl.trainer import make_train_dataset

    with pytest.raises(SelfVerifyDataError, match="lacks \\['answer'\\]"):
        make_train_dataset([{"problem_id": "1", "question": "1+1"}])
    with pytest.raises(ValueError, match="problem_id '7' has two answers"):
        make_train_dataset(
            [{"problem_id": "7", "question": "q", "answer": "1"},
             {"problem_id": "7", "question": "q", "answer": "2"}]
        )  # fmt: skip
    with pytest.raises(SelfVerifyDataError, match="no rows"):
        make_train_dataset([])


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"num_generations": 1, "per_device_train_batch_size": 4}, "num_generations=1"),
        ({"num_generations": 3, "per_device_train_batch_size": 8}, "does not divide"),
        ({"verification_interval": 0}, "verification_interval=0"),
        ({"verification_looplen": 0}, "verification_looplen=0"),
        ({"mode": "both"}, "mode='both'"),
        ({"verification_mode": "judge"}, "verification_mode='judge'"),
        ({"bf16": True}, "use_cpu=True, bf16=False"),
        ({"mixed_verification_fraction": 1.5}, "mixed_verification_fraction"),
    ],
)
def test_config_errors(kw, match):
    from selfverify_rl.trainer import cpu_config

    base = {"num_generations": 4, "per_device_train_batch_size": 8}
    with pytest.raises((SelfVerifyConfigError, ValueError), match=match):
        cpu_config(**{**base, **kw})


def test_direct_config_bf16_on_cpu(tmp_path):
    from selfverify_rl.trainer import SelfVerifyConfig

    with pytest.raises(SelfVerifyConfigError, match="use_cpu=True"):
        SelfVerifyConfig(output_dir=str(tmp_path), use_cpu=True, bf16=True)


def test_trl_parser_reads_the_config(tmp_path):
    from selfverify_rl.trainer import SelfVerifyConfig
    from trl import TrlParser

    (cfg,) = TrlParser((SelfVerifyConfig,)).parse_args_into_dataclasses(
        ["--output_dir", str(tmp_path), "--mode", "verify", "--verification_interval", "2",
         "--use_cpu", "true", "--num_generations", "4", "--per_device_train_batch_size", "8"]
    )  # fmt: skip
    assert (cfg.mode, cfg.verification_interval, cfg.num_generations) == ("verify", 2, 4)


def test_trl_without_hook_names_supported_range():
    from selfverify_rl.trainer import SUPPORTED_TRL, check_trl

    class OldTrainer:
        def _generate_and_score_completions(self, inputs, extra):  # different signature
            return inputs

    class NoHook:
        pass

    for cls in (OldTrainer, NoHook):
        with pytest.raises(UnsupportedTRLError, match=re.escape(SUPPORTED_TRL)):
            check_trl(cls)
    with pytest.raises(UnsupportedTRLError, match=re.escape(">=1.16,<2")):
        check_trl(version="0.19.1")
    check_trl()  # the installed trl is supported


def test_long_candidate_left_truncated_and_long_question_rejected(tiny_tok, caplog):
    import random

    from selfverify_rl.sampling import Rollout, build_verification_samples, fit_verification_prompt

    prompt, cut = fit_verification_prompt("1+2", "9" * 200 + "END", "plain", tiny_tok, 60)
    assert (
        cut
        and prompt.rstrip().endswith("END. Box Yes or No.")
        and len(tiny_tok(prompt)["input_ids"]) <= 60
    )
    with pytest.raises(SelfVerifyDataError, match="max_prompt_tokens=20"):
        fit_verification_prompt("1+2" * 20, "3", "plain", tiny_tok, 20)
    long = "x" * 300 + "\\boxed{3}"
    rollouts = [Rollout("a", "1+2", long, float(j < 2), True) for j in range(4)] * 1
    rollouts += [Rollout("b", "1+2", long, float(j < 2), True) for j in range(4)]
    with caplog.at_level("INFO", logger="selfverify_rl.sampling"):
        out = build_verification_samples(
            rollouts, 4, "judge_response", random.Random(0), tokenizer=tiny_tok,
            max_prompt_tokens=80,
        )  # fmt: skip
    assert out.stats.n_truncated == len(out) == 2
    assert "left-truncated" in caplog.text


def test_unknown_verification_mode_in_builder():
    from selfverify_rl.sampling import build_verification_samples

    with pytest.raises(SelfVerifyConfigError, match="judge_answer"):
        build_verification_samples([], 8, "judge_everything")
