"""selfverify-rl: learning to self-verify (Chen et al., ICML 2026) with trl's GRPO.

GRPO on answer generation, on verification of the policy's own answers (balanced Yes/No
candidates built from its rollouts), or on both (alternating with a stale buffer, stage-wise, or
mixed into every batch), plus verification metrics, self-verification sets and
verification-guided majority voting.

Importing this package does not import torch or trl; the public names load lazily.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from llmcore.lazy import lazy_exports
from llmcore.registry import MethodInfo

try:
    __version__ = version("selfverify-rl")
except PackageNotFoundError:  # pragma: no cover
    __version__ = "0.0.0"

METHOD = MethodInfo(
    name="selfverify-rl",
    paper="Learning to Self-Verify Makes Language Models Better Reasoners (ICML 2026)",
    summary="GRPO on generation, on self-verification of own answers, or both alternated",
    demo="selfverify_rl.demo:run",
    package="selfverify-rl",
    tags=("rl", "grpo", "self-verification", "math-reasoning"),
)

_LAZY = {
    "ArithmeticTask": ".tasks",
    "load_math": ".tasks",
    "generation_prompt": ".prompts",
    "verification_prompt": ".prompts",
    "extract_question": ".prompts",
    "extract_boxed": ".rewards",
    "normalize_answer": ".rewards",
    "parse_verdict": ".rewards",
    "generation_reward": ".rewards",
    "verification_reward": ".rewards",
    "make_reward_funcs": ".rewards",
    "Rollout": ".sampling",
    "VerificationSample": ".sampling",
    "VerificationBuffer": ".sampling",
    "build_verification_samples": ".sampling",
    "SelfVerifyConfig": ".trainer",
    "SelfVerifyGRPOTrainer": ".trainer",
    "cpu_config": ".trainer",
    "make_train_dataset": ".trainer",
    "generation_accuracy": ".evaluate",
    "verification_metrics": ".evaluate",
    "self_verification_set": ".evaluate",
    "guided_majority_vote": ".evaluate",
    "sft_warmup": ".sft",
    "warmup_pairs": ".sft",
    "lora_config": ".lora",
    "load_policy": ".lora",
    "SelfVerifyError": ".errors",
    "SelfVerifyConfigError": ".errors",
    "SelfVerifyDataError": ".errors",
    "UnsupportedTRLError": ".errors",
}

__all__ = ["METHOD", "__version__", *_LAZY]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
