"""Fine-tuning methods compared by EDL: full, LoRA (peft), k random scalars, prompt (control)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from excess_dl.config import EDLConfig
from excess_dl.errors import EDLConfigError


@dataclass
class Learnable:
    """A private copy of the base model prepared for one method.

    ``params`` are handed to the optimiser; ``after_step`` restores entries a gradient mask
    froze (so weight decay cannot move them either)."""

    model: Any
    params: list[Any]
    trainable_params: int
    masks: list[tuple[Any, Any, Any]] = field(default_factory=list)

    def after_step(self) -> None:
        import torch

        with torch.no_grad():
            for p, mask, orig in self.masks:
                p.copy_(torch.where(mask, p, orig))


def has_dropout(model: Any) -> bool:
    """Whether a forward in train mode differs from eval mode (dropout modules or config)."""
    import torch

    for mod in model.modules():
        if isinstance(mod, torch.nn.Dropout) and mod.p > 0:
            return True
    cfg = getattr(model, "config", None)
    if cfg is not None and hasattr(cfg, "to_dict"):
        for k, v in cfg.to_dict().items():
            if "dropout" in k and isinstance(v, int | float) and not isinstance(v, bool) and v > 0:
                return True
    return False


def prepare(base: Any, config: EDLConfig, *, device: Any = None) -> Learnable:
    """Deep-copy ``base`` (the caller's model is never touched) and set up ``config.method``."""
    import torch

    model = copy.deepcopy(base)
    if device is not None:
        model.to(device)
    for p in model.parameters():
        p.requires_grad_(False)
    method = config.method
    if method in ("full",):
        for p in model.parameters():
            p.requires_grad_(True)
        params = [p for p in model.parameters()]
        return Learnable(model, params, sum(p.numel() for p in params))
    if method == "prompt":
        return Learnable(model, [], 0)
    if method == "lora":
        return _lora(model, config)
    # random_params: k scalar entries drawn uniformly over all parameters (seeded)
    named = [(n, p) for n, p in model.named_parameters()]
    total = sum(p.numel() for _, p in named)
    k = config.random_params_k
    if k > total:
        raise EDLConfigError(
            f"random_params_k={k} exceeds the model's {total} parameters; choose k <= {total}"
        )
    gen = torch.Generator().manual_seed(config.seed)
    flat = torch.randperm(total, generator=gen)[:k]
    masks, params, offset = [], [], 0
    for _, p in named:
        sel = flat[(flat >= offset) & (flat < offset + p.numel())] - offset
        offset += p.numel()
        if sel.numel() == 0:
            continue
        mask = torch.zeros(p.numel(), dtype=torch.bool)
        mask[sel] = True
        mask = mask.view_as(p).to(p.device)
        p.requires_grad_(True)
        p.register_hook(lambda g, m=mask: g * m)
        masks.append((p, mask, p.detach().clone()))
        params.append(p)
    return Learnable(model, params, k, masks)


def _lora(model: Any, config: EDLConfig) -> Learnable:
    import torch
    from peft import LoraConfig, get_peft_model

    opts = config.lora
    r = int(opts["r"])
    alpha = opts["alpha"] if opts["alpha"] is not None else 2 * r
    targets = opts["target_modules"]
    cfg = LoraConfig(
        r=r,
        lora_alpha=alpha,
        lora_dropout=float(opts["dropout"]),
        target_modules=targets,
        task_type="CAUSAL_LM",
    )
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)
            peft_model = get_peft_model(model, cfg)
    except ValueError as e:
        raise EDLConfigError(
            f"LoRA target_modules={targets!r} matches no module of the model ({e}); use "
            "'all-linear' or names such as ['q_proj', 'v_proj']"
        ) from e
    params = [p for p in peft_model.parameters() if p.requires_grad]
    n = sum(p.numel() for p in params)
    if n == 0:
        raise EDLConfigError(f"LoRA target_modules={targets!r} produced no trainable parameter")
    return Learnable(peft_model, params, n)
