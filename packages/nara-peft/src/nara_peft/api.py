"""``get_nara_model``: wrap a model with NaRA via PEFT."""

from __future__ import annotations

from typing import Any

from torch import nn

from nara_peft.config import NaraConfig
from nara_peft.errors import NaraConfigError
from nara_peft.register import add_special_forward_args, register


def get_nara_model(model: nn.Module, config: NaraConfig, adapter_name: str = "default") -> Any:
    """Register NARA, wrap ``model`` in a ``PeftModel`` and mark A, B and the mapper trainable."""
    register()
    from peft import get_peft_model

    if not isinstance(config, NaraConfig):
        raise NaraConfigError(f"config must be a NaraConfig, got {type(config).__name__}")
    try:
        peft_model = get_peft_model(model, config, adapter_name=adapter_name)
    except ValueError as e:
        if "not found in the base model" in str(e) or "No modules were targeted" in str(e):
            raise NaraConfigError(
                f"no module of {type(model).__name__} matches target_modules="
                f"{config.target_modules!r}; pass names that exist (e.g. q_proj, v_proj)"
            ) from e
        raise
    add_special_forward_args(peft_model)
    return peft_model
