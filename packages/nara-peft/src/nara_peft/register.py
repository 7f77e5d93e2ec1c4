"""Registration of NaRA as an out-of-tree PEFT method."""

from __future__ import annotations

import functools
from typing import Any

from nara_peft.errors import NaraConfigError, NaraVersionError

PEFT_FLOOR = "0.21"


def _check_peft() -> None:
    import peft
    from peft.tuners.tuners_utils import BaseTuner

    if not hasattr(BaseTuner, "_get_adapter_state_dict") or not hasattr(
        BaseTuner, "_remap_adapter_state_dict_for_load"
    ):
        raise NaraVersionError(
            f"nara-peft needs peft>={PEFT_FLOOR} (tuner-level state-dict hooks); found peft "
            f"{peft.__version__}. Upgrade with: pip install 'peft>={PEFT_FLOOR}'"
        )


def register() -> None:
    """Insert NARA into peft's type/config/tuner/prefix mappings; idempotent."""
    _check_peft()
    import peft.mapping as pm
    from peft import PeftModel

    from nara_peft.config import NaraConfig, NaraPeftType
    from nara_peft.model import NaraModel

    key = NaraPeftType.NARA
    for table, value in (
        (pm.PEFT_TYPE_TO_CONFIG_MAPPING, NaraConfig),
        (pm.PEFT_TYPE_TO_TUNER_MAPPING, NaraModel),
        (pm.PEFT_TYPE_TO_PREFIX_MAPPING, NaraModel.prefix),
    ):
        current = table.get(key)
        if current is not None and current is not value and current != value:
            raise NaraConfigError(f"peft already maps {key.value!r} to {current!r}; not overriding")
        table[key] = value
    if not getattr(PeftModel.from_pretrained, "_nara_hooked", False):
        original = PeftModel.from_pretrained.__func__  # type: ignore[attr-defined]

        @functools.wraps(original)
        def from_pretrained(cls: type, *args: Any, **kwargs: Any) -> Any:
            model = original(cls, *args, **kwargs)
            add_special_forward_args(model)
            return model

        from_pretrained._nara_hooked = True  # type: ignore[attr-defined]
        PeftModel.from_pretrained = classmethod(from_pretrained)  # type: ignore[method-assign]


def add_special_forward_args(peft_model: Any) -> None:
    """Let PEFT's own wrappers strip NaRA's forward kwargs before the HF model sees them."""
    from nara_peft.config import NaraPeftType
    from nara_peft.model import NOISE_KWARGS

    configs = getattr(peft_model, "peft_config", {}) or {}
    if any(getattr(c, "peft_type", None) == NaraPeftType.NARA for c in configs.values()):
        peft_model.special_peft_forward_args.update(NOISE_KWARGS)
