"""Baselines at matched parameter count (closed form vs the real wrapped model)."""

from __future__ import annotations

import copy

from conftest import TARGETS, small_cfg
from nara_peft import get_nara_model
from nara_peft.baselines import (
    constant_config,
    matched_lora_config,
    nara_param_count,
    target_layer_dims,
)


def test_matched_lora_rank_and_counts(base):
    cfg = small_cfg()
    dims = target_layer_dims(base, TARGETS)
    assert len(dims) == 8
    model = get_nara_model(copy.deepcopy(base), cfg)
    real = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert nara_param_count(cfg, dims) == real == 6224
    lora = matched_lora_config(cfg, base)
    assert lora.r == 6 and lora.lora_alpha == 6  # 6,144 params, the LoRA r6 arm of the experiment
    const = constant_config(cfg)
    const_model = get_nara_model(copy.deepcopy(base), const)
    n_const = sum(p.numel() for p in const_model.parameters() if p.requires_grad)
    assert nara_param_count(const, dims) == n_const == 4096 + 16
