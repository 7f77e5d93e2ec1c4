"""GPU paths (``gpu``): vLLM evaluation and ``use_vllm`` GRPO config. Not run in CI: trl 1.16
wants vLLM <= 0.31 while the lock has 0.33, so the vLLM rollout path is untested."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


def test_vllm_grpo_config_on_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    pytest.importorskip("vllm")
    from compgen_rl.train import GRPOArgs, grpo_config

    cfg = grpo_config(GRPOArgs(use_vllm=True, bf16=True), cpu=False)
    assert cfg.use_vllm and cfg.vllm_mode == "colocate"
