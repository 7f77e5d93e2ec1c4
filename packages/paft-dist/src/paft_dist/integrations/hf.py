"""transformers / TRL: `PAFTCallback` attaches PAFT (and a pre-step fault injector) to a Trainer.

    trainer = Trainer(..., args=TrainingArguments(use_cpu=True, ddp_backend="gloo"),
                      callbacks=[PAFTCallback(PAFTConfig(mode="sync", sync_every=10))])

Launch with `torchrun --nproc-per-node 2 train.py`. Works unchanged with `trl.SFTTrainer` (any
Trainer subclass that passes `model` and `optimizer` to its callbacks).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from transformers import TrainerCallback

from paft_dist.config import FaultSpec, PAFTConfig
from paft_dist.errors import PAFTError


class PAFTCallback(TrainerCallback):
    """On `on_train_begin`, wraps the Trainer's model/optimizer with PAFT (and the injector)."""

    def __init__(
        self, config: PAFTConfig | None = None, fault_specs: Sequence[FaultSpec] | None = None
    ) -> None:
        self.config = config if config is not None else PAFTConfig()
        self.fault_specs = [
            FaultSpec(**{**f.__dict__, "where": "pre_step"}) for f in (fault_specs or [])
        ]
        self.paft: Any = None
        self.injector: Any = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        from paft_dist.faults import FaultInjector
        from paft_dist.paft import PAFT

        model, optimizer = kwargs.get("model"), kwargs.get("optimizer")
        if model is None or optimizer is None:
            raise PAFTError(
                "PAFTCallback needs the Trainer's model and optimizer in on_train_begin; "
                "attach it through Trainer(callbacks=[...]), not after training started"
            )
        if self.fault_specs:
            self.injector = FaultInjector(self.fault_specs).attach(optimizer)
        self.paft = PAFT(model, optimizer, self.config).attach()

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
        if self.paft is not None and logs is not None:
            logs["paft_syncs"] = self.paft.num_syncs
            logs["paft_h"] = self.paft.current_h

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.paft is not None:
            self.paft.finalize()
            self.paft.detach()
        if self.injector is not None:
            self.injector.detach()
