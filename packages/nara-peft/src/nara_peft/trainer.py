"""``NaraDiffusionTrainer``: a ``transformers.Trainer`` whose loss is the LLaDA SFT loss.

Batches carry ``input_ids`` and ``prompt_lengths``; lambda = the sampled t reaches NaRA as the
``noise_level`` kwarg. The mean loss per lambda bucket is added to the logs.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import Trainer

from nara_peft.diffusion import diffusion_sft_loss
from nara_peft.finetune import _add_buckets, _empty_buckets, _mean_buckets


class NaraDiffusionTrainer(Trainer):
    """Trainer for masked diffusion LMs; pass ``mask_token_id`` (and ``pass_noise=False`` for
    adapters that take no noise level, e.g. plain LoRA)."""

    def __init__(
        self, *args: Any, mask_token_id: int, pass_noise: bool = True, seed: int = 0, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.mask_token_id = mask_token_id
        self.pass_noise = pass_noise
        self._gen = torch.Generator().manual_seed(seed)
        self._buckets = _empty_buckets()

    def compute_loss(
        self,
        model: Any,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: Any = None,
    ) -> Any:
        loss, info = diffusion_sft_loss(
            model,
            inputs["input_ids"],
            inputs["prompt_lengths"],
            self.mask_token_id,
            self._gen,
            pass_noise=self.pass_noise,
        )
        _add_buckets(self._buckets, info["t"].cpu(), info["per_row"].cpu())
        return (loss, {"loss": loss}) if return_outputs else loss

    def log(self, logs: dict[str, float], *args: Any, **kwargs: Any) -> None:
        for k, v in _mean_buckets(self._buckets).items():
            if v is not None:
                logs[f"loss_lambda_{k}"] = v
        self._buckets = _empty_buckets()
        super().log(logs, *args, **kwargs)
