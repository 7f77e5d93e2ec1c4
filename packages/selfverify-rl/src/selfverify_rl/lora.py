"""LoRA training through peft (extra ``peft``): an adapter config for the GRPO and SFT trainers
and a loader for the adapter folders they save.

Both trainers take ``peft_config=`` and wrap the model with ``peft.get_peft_model``, so only the
adapter weights train; ``trainer.save_model(out)`` then writes ``adapter_config.json`` and
``adapter_model.safetensors`` (no full weights). :func:`load_policy` loads such a folder on its
base model (named in the adapter config), or a full checkpoint as usual.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from llmcore.models import is_adapter_dir  # a folder with a peft adapter and no full model

__all__ = ["is_adapter_dir", "load_policy", "lora_config"]

PEFT_HINT = "pip install 'selfverify-rl[peft]'"


def _import_peft() -> Any:
    from selfverify_rl.errors import SelfVerifyConfigError

    try:
        import peft
    except ImportError as exc:
        raise SelfVerifyConfigError(f"LoRA training needs the peft extra: {PEFT_HINT}") from exc
    return peft


def lora_config(
    r: int = 16,
    alpha: int = 32,
    dropout: float = 0.05,
    target_modules: Sequence[str] | str | None = None,
) -> Any:
    """A ``peft.LoraConfig`` for a causal LM (bias off), with the defaults of trl's
    ``ModelConfig`` (``lora_r`` 16, ``lora_alpha`` 32, ``lora_dropout`` 0.05).

    ``target_modules``: module names (e.g. ``["q_proj", "v_proj"]``), ``"all-linear"``, or
    ``None`` for peft's default for the architecture (attention query/value projections)."""
    from selfverify_rl.errors import SelfVerifyConfigError

    peft = _import_peft()
    if not isinstance(r, int) or r < 1:
        raise SelfVerifyConfigError(f"lora r={r!r}: use an int >= 1 (e.g. 16)")
    if alpha <= 0:
        raise SelfVerifyConfigError(f"lora alpha={alpha!r}: use a positive number (e.g. 2 * r)")
    if not 0.0 <= dropout < 1.0:
        raise SelfVerifyConfigError(f"lora dropout={dropout!r}: use 0 <= dropout < 1")
    targets: list[str] | str | None
    if not isinstance(target_modules, str) and list(target_modules or []) == ["all-linear"]:
        target_modules = "all-linear"
    if isinstance(target_modules, str) and target_modules != "all-linear":
        targets = [target_modules]
    elif target_modules is None or isinstance(target_modules, str):
        targets = target_modules
    else:
        targets = list(target_modules)
    return peft.LoraConfig(
        task_type="CAUSAL_LM",
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=targets,
        bias="none",
    )


def load_policy(
    path: str | os.PathLike[str],
    *,
    base: str | None = None,
    merge: bool = True,
    device: str | None = None,
) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a checkpoint, a hub id, or a local LoRA adapter folder.

    An adapter folder is loaded on ``base`` (default: the ``base_model_name_or_path`` its
    adapter config records) and, with ``merge=True``, merged into plain transformers weights;
    its tokenizer comes from the adapter folder when saved there, else from the base (all
    through ``llmcore.models.load_model_and_tokenizer``)."""
    from llmcore.models import load_model_and_tokenizer

    if not is_adapter_dir(path):
        return load_model_and_tokenizer(path, device=device)
    _import_peft()  # names this package's extra when peft is missing
    return load_model_and_tokenizer(path, base_model=base, merge_adapter=merge, device=device)
