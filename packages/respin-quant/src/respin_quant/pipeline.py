"""End-to-end pipeline (rotate -> quantise) and the save/load format of quantised checkpoints."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from respin_quant.arch import check_model, get_state
from respin_quant.config import QuantConfig, RotationConfig
from respin_quant.errors import RotationError
from respin_quant.kv import IMPL_NAME, detach_kv_quant
from respin_quant.learn import learn_rotations
from respin_quant.packing import PACKED_FILE, load_packed_state, save_packed_state
from respin_quant.ptq import quantize, reattach_quantizers
from respin_quant.rotation import (
    OnlineState,
    RotationSet,
    Transition,
    apply_rotations,
    attach_online,
    init_rotations,
    make_had_down,
    online_state,
)

log = logging.getLogger(__name__)


def rotations_for(
    model: nn.Module,
    rot: RotationConfig,
    q: QuantConfig,
    calib_ids: Tensor | None,
    progress: bool = False,
) -> RotationSet | None:
    """The rotation set of ``rot.method``: None (no rotation), random Hadamard, or learned."""
    if rot.method == "none":
        return None
    if rot.method == "quarot":
        return init_rotations(model, "quarot", rot.rotation_seed)
    if calib_ids is None:
        raise RotationError(f"method {rot.method!r} learns rotations and needs calibration ids")
    return learn_rotations(model, calib_ids, rot, q, progress=progress)


def quantize_pipeline(
    model: nn.Module,
    tokenizer: Any,
    q: QuantConfig,
    rot: RotationConfig,
    calib_dataset: str | Tensor = "wikitext2",
    seed: int = 0,
    *,
    progress: bool = False,
) -> tuple[nn.Module, dict[str, Any]]:
    """Rotate (learn if needed), fuse and quantise ``model`` in place; returns (model, report)."""
    d = check_model(model)
    calib = None
    needs = rot.method in ("spinquant", "respin") or (
        q.weight_quantizer == "gptq" and q.w_bits < 16
    )
    if needs:
        if isinstance(calib_dataset, Tensor):
            calib = calib_dataset
        else:
            from respin_quant.evaluate import calibration_windows

            n = max(
                rot.calib_nsamples if rot.method in ("spinquant", "respin") else 0, q.gptq_nsamples
            )
            calib = calibration_windows(tokenizer, calib_dataset, n, rot.calib_seqlen, seed)
    t0 = time.perf_counter()
    rs = rotations_for(model, rot, q, calib, progress)
    t_learn = time.perf_counter() - t0
    if rs is not None:
        apply_rotations(
            model,
            rs,
            rot.residual_rank if rot.method == "respin" else 0,
            rot.rebase,
            online_had_down=rot.online_had_down,
            online_dense=rot.online_dense,
            online_block=rot.online_block,
            center_embeddings=rot.center_embeddings,
        )
        if rot.online_had_qk is not None:
            get_state(model)["online_had_qk"] = rot.online_had_qk
    t1 = time.perf_counter()
    quantize(model, q, calib, progress=progress)
    report: dict[str, Any] = {
        "method": rot.method,
        "quant": q.label,
        "calibration_seconds": t_learn,
        "quantize_seconds": time.perf_counter() - t1,
    }
    if rs is not None:
        report["rotation_orthogonality_error"] = rs.orthogonality_error()
        report.update({k: v for k, v in rs.info.items() if k != "loss_history" and k != "dims"})
    st = online_state(model)
    if st is not None:
        report.update(st.macs_per_token(d))
    model._respin_configs = (q, rot)  # type: ignore[assignment]
    return model, report


# ----------------------------------------------------------------------------- save / load


def save_quantized(
    model: nn.Module,
    out_dir: str | Path,
    *,
    report: dict[str, Any] | None = None,
    base_model: str = "",
    tokenizer: Any = None,
    packed: bool | None = None,
) -> Path:
    """Write a checkpoint directory: fused weights (already on the quantisation grid), the
    transitions, the rotations, ``respin_config.json`` and ``report.json``.

    ``packed`` (default: whenever weights are quantised to <= 8 bits) stores the quantised
    linears as real ``w_bits``-bit codes plus scales in ``respin_packed.safetensors`` instead
    of ``model.safetensors`` (bit-identical after loading; a plain ``from_pretrained`` then
    fails loudly instead of silently dropping the online parts)."""
    from safetensors.torch import save_file

    from respin_quant import __version__

    d = check_model(model)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    st = dict(get_state(model))
    w_bits = int((st.get("quant") or {}).get("w_bits", 16))
    if packed is None:
        packed = bool(st.get("quantized")) and w_bits <= 8
    if packed and not (st.get("quantized") and w_bits <= 8):
        raise RotationError(
            "packed=True needs a model quantised to <= 8 weight bits (run quantize first)"
        )
    pack_info: dict[str, int] | None = None
    cfg = model.config
    impl = cfg._attn_implementation
    had_kv = impl == IMPL_NAME
    if had_kv:
        saved_kv = {i: ly.self_attn._respin_kv for i, ly in enumerate(model.model.layers)}
        detach_kv_quant(model)
    try:
        for stale in (out / "model.safetensors", out / PACKED_FILE):
            stale.unlink(missing_ok=True)
        if packed:
            scales = {
                n: m.w_scale
                for n, m in model.named_modules()
                if getattr(m, "w_scale", None) is not None
            }
            if not scales:
                log.warning("no grid scales recorded on this model: every weight stored unpacked")
            model.config.save_pretrained(out)
            if getattr(model, "generation_config", None) is not None:
                model.generation_config.save_pretrained(out)
            pack_info = save_packed_state(model.state_dict(), scales, w_bits, out / PACKED_FILE)
        else:
            model.save_pretrained(out)
    finally:
        if had_kv:
            from respin_quant.kv import _register

            _register()
            cfg._attn_implementation = IMPL_NAME
            for i, ly in enumerate(model.model.layers):
                ly.self_attn._respin_kv = saved_kv[i]
    if tokenizer is not None:
        tokenizer.save_pretrained(out)
    ost = online_state(model)
    tensors: dict[str, Tensor] = {}
    if ost is not None:
        for kind, lst in (("attn", ost.attn), ("ffn", ost.ffn)):
            for i, t in enumerate(lst):
                Q = (
                    t.Q
                    if t.Q is not None
                    else torch.eye(t.M.shape[0] or d.hidden, dtype=torch.float64)
                )
                if t.is_identity:
                    Q = torch.zeros(d.hidden, 0, dtype=torch.float64)
                    M = torch.zeros(0, 0, dtype=torch.float64)
                else:
                    M = t.M
                tensors[f"{kind}.{i}.Q"] = Q.double().contiguous()
                tensors[f"{kind}.{i}.M"] = M.double().contiguous()
        save_file(tensors, str(out / "respin_transitions.safetensors"))
    rs = getattr(model, "_respin_rotations", None)
    if rs is not None:
        rs.save(out / "rotations.safetensors")
    q, rot = getattr(model, "_respin_configs", (None, None))
    meta = {
        "package_version": __version__,
        "base_model": base_model,
        "hidden_size": d.hidden,
        "num_layers": d.layers,
        "residual_rank": st.get("residual_rank", 0),
        "state": st,
        "quant_config": st.get("quant") or (q.to_dict() if q else None),
        "rotation_config": rot.to_dict() if rot else None,
        "online_had_down": (ost.had_down.describe() if ost is not None and ost.had_down else None),
        "packed": pack_info,
    }
    (out / "respin_config.json").write_text(json.dumps(meta, indent=2, default=str))
    (out / "report.json").write_text(json.dumps(report or {}, indent=2, default=str))
    (out / "README.md").write_text(
        "# respin-quant checkpoint\n\nFused, rotated weights already on the quantisation grid.\n"
        "**Load with `respin_quant.load_quantized(dir)`**: a plain `from_pretrained` ignores the\n"
        "online residual transitions, the down_proj Hadamard and the activation quantisers, so it\n"
        "computes a different function (like r = 0 without H_down).\n"
    )
    return out


def load_quantized(
    out_dir: str | Path, *, dtype: torch.dtype | str | None = None, device: str | None = None
) -> nn.Module:
    """Load a :func:`save_quantized` directory and re-attach hooks and fake quantisers.

    ``dtype``: default the dtype the weights were saved in. ``device``: default the CPU. An
    unpacked directory loads through :func:`llmcore.models.load_causal_lm` (safetensors only,
    no remote code)."""
    from safetensors import safe_open

    from llmcore.models import load_causal_lm

    out = Path(out_dir)
    meta_p = out / "respin_config.json"
    if not meta_p.exists():
        raise RotationError(f"{out} has no respin_config.json: not a save_quantized directory")
    meta = json.loads(meta_p.read_text())
    scales: dict[str, Tensor] = {}
    if (out / PACKED_FILE).exists():
        model, scales = _load_packed(out, dtype)
    else:
        model = load_causal_lm(out, dtype=dtype or _saved_dtype(out), device="cpu")
    if device:
        model.to(device)
    d = check_model(model)
    st = meta.get("state", {})
    rank = int(meta.get("residual_rank", 0))
    if st.get("rotated"):
        tp = out / "respin_transitions.safetensors"
        attn: list[Transition] = []
        ffn: list[Transition] = []
        with safe_open(str(tp), framework="pt") as f:
            keys = set(f.keys())
            for kind, lst in (("attn", attn), ("ffn", ffn)):
                for i in range(d.layers):
                    if f"{kind}.{i}.Q" not in keys:
                        raise RotationError(f"{tp}: missing {kind}.{i}.Q")
                    Q, M = f.get_tensor(f"{kind}.{i}.Q"), f.get_tensor(f"{kind}.{i}.M")
                    if Q.shape[1] == 0:
                        lst.append(Transition(None, torch.zeros(0, 0, dtype=torch.float64), 0))
                        continue
                    if Q.shape[1] != rank or Q.shape[0] != d.hidden:
                        raise RotationError(
                            f"{tp}: {kind}.{i}.Q has shape {tuple(Q.shape)} but respin_config.json says "
                            f"rank {rank}, hidden {d.hidden}"
                        )
                    lst.append(Transition(None if rank == d.hidden else Q, M, rank))
        had = make_had_down(
            model,
            bool(st.get("online_had_down")),
            bool(st.get("online_dense")),
            block=bool(st.get("online_block")),
        )
        attach_online(model, OnlineState(attn, ffn, rank, had))
        if (out / "rotations.safetensors").exists():
            model._respin_rotations = RotationSet.load(out / "rotations.safetensors", model)  # type: ignore[assignment]
    qd = meta.get("quant_config")
    model.config.respin = {k: v for k, v in st.items() if k not in ("quantized", "quant")}
    if st.get("quantized") and qd:
        reattach_quantizers(model, QuantConfig(**qd))
        for name, sc in scales.items():
            model.get_submodule(name).w_scale = sc
    model._respin_configs = (  # type: ignore[assignment]
        QuantConfig(**qd) if qd else None,
        RotationConfig(**meta["rotation_config"]) if meta.get("rotation_config") else None,
    )
    return model


def _saved_dtype(out: Path) -> str:
    """The dtype recorded in ``config.json`` (float32 when it records none)."""
    cfg = json.loads((out / "config.json").read_text())
    return str(cfg.get("dtype") or cfg.get("torch_dtype") or "float32")


def _load_packed(out: Path, dtype: torch.dtype | str | None) -> tuple[nn.Module, dict[str, Tensor]]:
    """Build the model from ``config.json`` and fill it from the packed file (strict)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    state, scales = load_packed_state(out / PACKED_FILE)
    cfg = AutoConfig.from_pretrained(out)
    cfg.tie_word_embeddings = False  # rotation untied lm_head; both tensors are in the file
    floats = [t.dtype for t in state.values() if t.is_floating_point()]
    stored = max(set(floats), key=floats.count) if floats else torch.float32
    model = AutoModelForCausalLM.from_config(cfg, dtype=stored)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise RotationError(
            f"{out / PACKED_FILE} does not match config.json: missing {missing[:5]}, "
            f"unexpected {unexpected[:5]}"
        )
    if dtype is not None and dtype != "auto":
        from llmcore.runtime import select_dtype

        model.to(select_dtype(dtype))
    return model.eval(), scales


__all__ = ["asdict", "load_quantized", "quantize_pipeline", "rotations_for", "save_quantized"]
