"""Baselines at matched trainable-parameter count.

* LoRA with rank ``r'`` whose parameter count is closest to NaRA's (A, B plus the mapper);
* NaRA-constant: the same r x r extra factor without lambda (``input_mode='constant'``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from nara_peft.config import NaraConfig


def nara_param_count(config: NaraConfig, layer_dims: list[tuple[int, int]]) -> int:
    """Closed form: r(d_in + d_out) per layer + mapper (+ learnable embedding)."""
    r = config.r
    lora = sum(r * (di + do) for di, do in layer_dims)
    if config.input_mode == "constant":
        return lora + r * r
    m, h1, h2 = config.mapper_input_dim(), config.fnn_hidden_size_1, config.fnn_hidden_size_2
    groups = len(config.mapper_groups) if config.mapper_groups else 1
    mapper = (m * h1 + h1) + (h1 * h2 + h2) + (h2 * r * r + r * r)
    emb = 2 * config.embedding_dim if config.embedding_type == "mlp" else 0
    return lora + groups * mapper + emb


def matched_lora_rank(config: NaraConfig, layer_dims: list[tuple[int, int]]) -> int:
    """LoRA rank whose parameter count is closest to NaRA's."""
    target = nara_param_count(config, layer_dims)
    per_rank = sum(di + do for di, do in layer_dims)
    return max(1, round(target / per_rank))


def target_layer_dims(model: Any, target_modules: list[str]) -> list[tuple[int, int]]:
    """(d_in, d_out) of every ``nn.Linear`` whose name ends with a target."""
    from torch import nn

    dims = []
    for name, m in model.named_modules():
        if isinstance(m, nn.Linear) and any(
            name.endswith("." + t) or name == t for t in target_modules
        ):
            dims.append((m.in_features, m.out_features))
    return dims


def matched_lora_config(config: NaraConfig, model: Any) -> Any:
    """``peft.LoraConfig`` (lora_alpha = r) at NaRA's parameter count on ``model``."""
    from peft import LoraConfig

    targets = list(config.target_modules or [])
    r = matched_lora_rank(config, target_layer_dims(model, targets))
    return LoraConfig(r=r, lora_alpha=r, lora_dropout=config.lora_dropout, target_modules=targets)


def constant_config(config: NaraConfig) -> NaraConfig:
    """The noise-agnostic ablation: same r, C = I + eta P with a learnable P."""
    return replace(config, input_mode="constant")
