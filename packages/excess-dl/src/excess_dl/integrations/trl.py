"""Single-pass (first-epoch) prequential code recorded from a TRL ``SFTTrainer`` run.

With dropout 0 and no gradient accumulation the training forward of each batch, taken before
its optimizer step, is exactly the batch's code under theta_{j-1}: the callback sums the
completion-token cross-entropy of every row (labels != -100) in bits. Otherwise it refuses,
unless ``eval_forward=True`` lets it run an extra eval-mode forward per batch.
"""

from __future__ import annotations

import math
from typing import Any

from transformers import TrainerCallback

from excess_dl.errors import EDLConfigError, NumericalError
from excess_dl.methods import has_dropout


class PrequentialCallback(TrainerCallback):
    """Records ``per_example_bits`` (in training order) and ``batch_bits`` of the first epoch.

    ``mdl_bits`` is their sum, the single-pass MDL of :func:`excess_dl.compute_edl`
    (``mode="single_pass"``) when the trainer sees the data in order (``train_sampling_strategy
    ="sequential"``), uses a constant lr and the same tokenisation."""

    def __init__(self, *, eval_forward: bool = False) -> None:
        self.eval_forward = eval_forward
        self.per_example_bits: list[float] = []
        self.batch_bits: list[float] = []
        self._handle = None
        self._busy = False
        self._epoch_done = False

    @property
    def mdl_bits(self) -> float:
        return math.fsum(self.per_example_bits)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if model is None:
            raise EDLConfigError("PrequentialCallback needs the trainer's model")
        if not self.eval_forward:
            if args.gradient_accumulation_steps > 1:
                raise EDLConfigError(
                    f"gradient_accumulation_steps={args.gradient_accumulation_steps}: the "
                    "training loss is not the prequential code; set it to 1 or pass "
                    "PrequentialCallback(eval_forward=True)"
                )
            if has_dropout(model):
                raise EDLConfigError(
                    "the model has dropout > 0, so its training loss is not the eval-mode code; "
                    "set dropout to 0 or pass PrequentialCallback(eval_forward=True)"
                )
        self._handle = model.register_forward_hook(self._hook, with_kwargs=True)

    def on_epoch_end(self, args, state, control, **kwargs):
        self._epoch_done = True

    def on_train_end(self, args, state, control, **kwargs):
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def _hook(self, module, args, kwargs, output):
        import torch

        if self._busy or self._epoch_done or not module.training or not torch.is_grad_enabled():
            return None
        labels = kwargs.get("labels")
        if labels is None:
            return None
        if self.eval_forward:
            self._busy = True
            module.eval()
            try:
                with torch.no_grad():
                    output = module(*args, **kwargs)
            finally:
                module.train()
                self._busy = False
        bits = _row_bits(output, labels)
        if any(not math.isfinite(b) for b in bits):
            raise NumericalError(
                f"non-finite code length at n={len(self.per_example_bits) + len(bits)} "
                "(TRL SFTTrainer)"
            )
        self.per_example_bits.extend(bits)
        self.batch_bits.append(math.fsum(bits))
        return None


def _row_bits(output: Any, labels: Any) -> list[float]:
    """Completion bits per row from the model's logits, or from TRL's fused LM head output
    (per-token ``log_probs``, zero where the label is -100)."""
    import torch

    with torch.no_grad():
        logits = getattr(output, "logits", None)
        if logits is not None:
            logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
            tgt = labels[:, 1:]
            mask = tgt != -100
            tok = logp.gather(-1, tgt.clamp_min(0).unsqueeze(-1)).squeeze(-1) * mask
        else:
            tok = output.log_probs.float()
        return (-tok.sum(1) / math.log(2)).tolist()


def edl_sft_config(output_dir: str | None = None, **overrides: Any) -> Any:
    """A ``trl.SFTConfig`` whose one epoch is the single-pass learner of
    :class:`~excess_dl.config.EDLConfig` (data order, constant lr, AdamW betas (0.9, 0.999),
    no weight decay or clipping, completion-only loss, CPU fp32, nothing saved or reported)."""
    try:
        import trl
    except ImportError as e:  # pragma: no cover - depends on the environment
        from llmcore.errors import MissingExtraError

        raise MissingExtraError("the TRL integration", "trl", package="excess-dl") from e
    import tempfile

    kw: dict[str, Any] = {
        "output_dir": output_dir or tempfile.mkdtemp(prefix="excess-dl-sft-"),
        "num_train_epochs": 1,
        "per_device_train_batch_size": 16,
        "learning_rate": 1e-3,
        "lr_scheduler_type": "constant",
        "warmup_steps": 0,
        "weight_decay": 0.0,
        "adam_beta1": 0.9,
        "adam_beta2": 0.999,
        "max_grad_norm": 0.0,
        "completion_only_loss": True,
        "train_sampling_strategy": "sequential",
        "save_strategy": "no",
        "report_to": [],
        "logging_strategy": "no",
        "use_cpu": True,
        "bf16": False,
        "fp16": False,
        "dataloader_num_workers": 0,
        "seed": 0,
    }
    kw.update(overrides)
    return trl.SFTConfig(**kw)
