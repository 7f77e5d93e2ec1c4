"""Robustness transformations of a protected model: fine-tuning, LoRA, merges, int8,
pruning and a function-preserving neuron/head permutation (the evaluation harness)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch

from circuitprint.errors import MergeError


def _batches(tokenizer: Any, docs: Sequence[str], steps: int, batch: int, seed: int):
    from llmcore.zoo.train import encode_documents, pad_batch

    rows = encode_documents(tokenizer, docs, 10**6)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        idx = torch.randint(len(rows), (batch,), generator=gen).tolist()
        yield pad_batch([rows[i] for i in idx], tokenizer.pad_token_id)


def _train(model: Any, params: list, tokenizer: Any, docs, lr, steps, seed, batch) -> dict:
    import time

    from llmcore.zoo.train import causal_loss

    torch.manual_seed(seed)
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    model.train()
    t0, losses = time.perf_counter(), []
    for ids, att in _batches(tokenizer, docs, steps, batch, seed):
        loss = causal_loss(model, ids, att)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    return {"first_loss": losses[0], "final_loss": sum(losses[-20:]) / len(losses[-20:]),
            "train_seconds": time.perf_counter() - t0}  # fmt: skip


def finetune(model: Any, tokenizer: Any, docs: Sequence[str], *, lr: float, steps: int,
             seed: int = 0, batch: int = 32) -> dict[str, float]:  # fmt: skip
    """Full fine-tuning in place (AdamW, constant ``lr``, causal loss on every token)."""
    return _train(model, list(model.parameters()), tokenizer, docs, lr, steps, seed, batch)


LORA_TARGETS = ("q_proj", "v_proj", "gate_proj", "up_proj")


def lora_finetune(model: Any, tokenizer: Any, docs: Sequence[str], *, lr: float, steps: int,
                  seed: int = 0, batch: int = 32, r: int = 8, alpha: int = 16,
                  target_modules: Sequence[str] = LORA_TARGETS) -> tuple[Any, dict]:  # fmt: skip
    """peft LoRA fine-tune, then ``merge_and_unload()``: returns (merged model, stats)."""
    from peft import LoraConfig, get_peft_model

    names = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
    missing = [t for t in target_modules if t not in names]
    if missing:
        raise MergeError(
            f"LoRA target modules {missing} are absent from {type(model).__name__}; "
            f"pass target_modules from {sorted(n for n in names if n.endswith('proj'))}"
        )
    torch.manual_seed(seed)
    cfg = LoraConfig(r=r, lora_alpha=alpha, target_modules=list(target_modules), lora_dropout=0.0)
    pm = get_peft_model(model, cfg)
    params = [p for p in pm.parameters() if p.requires_grad]
    stats = _train(pm, params, tokenizer, docs, lr, steps, seed, batch)
    return pm.merge_and_unload(), stats


def _check_same(models: Sequence[Any]) -> list[dict[str, torch.Tensor]]:
    sds = [m.state_dict() for m in models]
    ref = {k: v.shape for k, v in sds[0].items()}
    for i, sd in enumerate(sds[1:], 1):
        shapes = {k: v.shape for k, v in sd.items()}
        if shapes != ref:
            bad = sorted(set(ref.items()) ^ set(shapes.items()))[:3]
            raise MergeError(
                f"cannot merge: model {i} differs in parameter names or shapes ({bad}); "
                "merges need models of one architecture and tokenizer"
            )
    return sds


def _from_state(template: Any, sd: dict[str, torch.Tensor]) -> Any:
    out = copy.deepcopy(template)
    out.load_state_dict(sd)
    return out.eval()


def merge_linear(models: Sequence[Any], weights: Sequence[float]) -> Any:
    """Weighted average of parameters, sum_k w_k theta_k (mergekit's ``linear``)."""
    if len(models) != len(weights) or not models:
        raise MergeError(f"need one weight per model, got {len(weights)} for {len(models)}")
    sds = _check_same(models)
    sd = {k: sum(w * s[k].float() for w, s in zip(weights, sds, strict=True)) for k in sds[0]}
    return _from_state(models[0], sd)


def merge_task_arithmetic(base: Any, models: Sequence[Any], lam: float = 1.0) -> Any:
    """Task arithmetic: theta_base + lam * sum_k (theta_k - theta_base)."""
    sds = _check_same([base, *models])
    sd = {k: sds[0][k] + lam * sum(s[k] - sds[0][k] for s in sds[1:]) for k in sds[0]}
    return _from_state(base, sd)


def ties_delta(deltas: Sequence[torch.Tensor], density: float) -> torch.Tensor:
    """TIES (Yadav et al. 2023) on one tensor: keep each task vector's top ``density``
    fraction by magnitude, elect the sign of the summed trimmed vectors, average the
    entries that agree with it (disjoint mean)."""
    if not 0.0 < density <= 1.0:
        raise MergeError(f"TIES density must lie in (0, 1], got {density}")
    trimmed = []
    for d in deltas:
        k = max(1, round(density * d.numel()))
        thr = d.abs().flatten().kthvalue(d.numel() - k + 1).values if k < d.numel() else -1.0
        trimmed.append(torch.where(d.abs() >= thr, d, torch.zeros_like(d)))
    stack = torch.stack(trimmed)
    sign = torch.sign(stack.sum(0))
    agree = (torch.sign(stack) == sign) & (stack != 0)
    num = (stack * agree).sum(0)
    cnt = agree.sum(0).clamp(min=1)
    return num / cnt


def merge_ties(base: Any, models: Sequence[Any], density: float = 0.5, lam: float = 1.0) -> Any:
    """TIES merge in package: theta_base + lam * TIES(theta_k - theta_base)."""
    sds = _check_same([base, *models])
    sd = {}
    for k, b in sds[0].items():
        if not b.is_floating_point():
            sd[k] = b
            continue
        sd[k] = b + lam * ties_delta([s[k] - b for s in sds[1:]], density)
    return _from_state(base, sd)


def mergekit_config(method: str, base: str, models: Sequence[str], *, density: float = 0.5,
                    weight: float | None = None, lam: float = 1.0) -> str:  # fmt: skip
    """A mergekit YAML for ``linear``, ``task_arithmetic`` or ``ties`` over model paths."""
    import yaml

    if method not in ("linear", "task_arithmetic", "ties"):
        raise MergeError(f"mergekit method {method!r}: use linear, task_arithmetic or ties")
    w = weight if weight is not None else 1.0 / len(models)
    params: dict[str, Any] = {"weight": w}
    if method == "ties":
        params["density"] = density
    cfg: dict[str, Any] = {
        "merge_method": method,
        "models": [{"model": m, "parameters": dict(params)} for m in models],
        "dtype": "float32",
    }
    if method != "linear":
        cfg["base_model"] = base
        cfg["parameters"] = {"lambda": lam} if method == "task_arithmetic" else {"normalize": True}
    return yaml.safe_dump(cfg, sort_keys=False)


def run_mergekit(config_yaml: str, out_dir: str) -> str:
    """Run a mergekit YAML (needs the ``mergekit`` extra) into ``out_dir``."""
    try:
        from mergekit.config import MergeConfiguration
        from mergekit.merge import MergeOptions, run_merge
    except ImportError as e:  # pragma: no cover - depends on the extra
        from llmcore.errors import MissingExtraError

        raise MissingExtraError(
            "mergekit merges need the extra: pip install 'circuitprint[mergekit]' "
            "(merge_ties/merge_linear work without it)"
        ) from e
    import yaml

    cfg = MergeConfiguration.model_validate(yaml.safe_load(config_yaml))
    run_merge(cfg, out_dir, options=MergeOptions(copy_tokenizer=True, lazy_unpickle=False))
    return out_dir


class Int8Linear(torch.nn.Module):
    """Linear layer with int8 weights (symmetric, per output channel) and int8 dynamic
    activations (symmetric, per token), dequantised for the matmul."""

    def __init__(self, lin: torch.nn.Linear) -> None:
        super().__init__()
        w = lin.weight.detach().float()
        scale = w.abs().amax(1, keepdim=True).clamp(min=1e-8) / 127.0
        self.register_buffer("qweight", torch.round(w / scale).clamp(-127, 127).to(torch.int8))
        self.register_buffer("scale", scale)
        self.bias = None if lin.bias is None else torch.nn.Parameter(lin.bias.detach().clone())
        self.in_features, self.out_features = lin.in_features, lin.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = x.abs().amax(-1, keepdim=True).clamp(min=1e-8) / 127.0
        xq = torch.round(x / s).clamp(-127, 127) * s
        y = xq @ (self.qweight.float() * self.scale).T
        return y if self.bias is None else y + self.bias


def quantize_int8(model: Any) -> Any:
    """Copy of ``model`` with every Linear inside the decoder blocks replaced by
    :class:`Int8Linear` (dynamic int8 quantisation, written in package)."""
    out = copy.deepcopy(model)
    for name, mod in list(out.named_modules()):
        for cname, child in list(mod.named_children()):
            full = f"{name}.{cname}" if name else cname
            if isinstance(child, torch.nn.Linear) and "layers." in full:
                setattr(mod, cname, Int8Linear(child))
    return out.eval()


def prune_magnitude(model: Any, frac: float = 0.2) -> Any:
    """Copy of ``model`` with the ``frac`` smallest-magnitude weights of each block Linear
    set to zero (unstructured magnitude pruning)."""
    if not 0.0 <= frac < 1.0:
        raise MergeError(f"prune fraction must lie in [0, 1), got {frac}")
    out = copy.deepcopy(model)
    with torch.no_grad():
        for name, mod in out.named_modules():
            if isinstance(mod, torch.nn.Linear) and "layers." in name:
                w = mod.weight
                k = int(frac * w.numel())
                if k:
                    thr = w.abs().flatten().kthvalue(k).values
                    w[w.abs() <= thr] = 0.0
    return out.eval()


def permute_neurons(model: Any, seed: int = 0, *, heads: bool = True) -> Any:
    """Function-preserving re-parameterisation: permute every block's MLP hidden units
    (rows of gate/up, columns of down) and, when key/value heads are not shared, its
    attention heads (q/k/v row blocks, o_proj column blocks). Logits are unchanged up to
    float rounding."""
    from llmcore.hooks import block_modules, get_module, layer_module_names

    out = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(seed)
    cfg = out.config
    with torch.no_grad():
        for i in range(len(layer_module_names(out))):
            bm = block_modules(out, i)
            mlp = get_module(out, bm.mlp)
            if not hasattr(mlp, "gate_proj"):
                raise MergeError("permute_neurons supports Llama/Qwen2/Mistral-style MLPs")
            perm = torch.randperm(mlp.up_proj.out_features, generator=gen)
            for lin in (mlp.gate_proj, mlp.up_proj):
                lin.weight.copy_(lin.weight[perm])
                if lin.bias is not None:
                    lin.bias.copy_(lin.bias[perm])
            mlp.down_proj.weight.copy_(mlp.down_proj.weight[:, perm])
            n_h = cfg.num_attention_heads
            n_kv = getattr(cfg, "num_key_value_heads", None) or n_h
            if heads and n_kv == n_h:
                attn = get_module(out, bm.attn)
                d = attn.o_proj.in_features // n_h
                hp = torch.randperm(n_h, generator=gen)
                idx = (hp[:, None] * d + torch.arange(d)[None]).flatten()
                for lin in (attn.q_proj, attn.k_proj, attn.v_proj):
                    lin.weight.copy_(lin.weight[idx])
                    if lin.bias is not None:
                        lin.bias.copy_(lin.bias[idx])
                attn.o_proj.weight.copy_(attn.o_proj.weight[:, idx])
    return out.eval()
