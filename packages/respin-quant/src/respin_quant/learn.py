"""Rotation learning with Cayley SGD on the Stiefel manifold.

The model is run in the *un-fused* form: the residual stream stays in the original basis; each
quantised linear rotates its input (x R), uses the rotated weight (W R, or R_out^T W R_in for
o/down) computed on the fly, fake-quantises activation and weight with straight-through
estimators, and rotates o_proj/down_proj outputs back (y R^T) before the residual add. This is
exactly the fused network with exact transitions. Only the rotations are trainable.

``shared=True`` ties every residual basis to one matrix (SpinQuant-style global R);
``shared=False`` learns R_attn[0..L], R_ffn[0..L-1] separately (ReSpinQuant).
"""

from __future__ import annotations

import copy
import logging
import math
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from respin_quant.arch import Dims, check_model, layers
from respin_quant.config import QuantConfig, RotationConfig
from respin_quant.errors import CalibrationDataError
from respin_quant.hadamard import OnlineHadamard
from respin_quant.kv import attach_kv_quant
from respin_quant.quant import ActQuantizer, quantize_sym, round_ste, weight_scale
from respin_quant.rotation import RotationSet, fuse_norms, init_rotations, make_had_down, polar

log = logging.getLogger(__name__)


class RotParams(nn.Module):
    """Trainable rotations (float32 parameters)."""

    def __init__(self, rs: RotationSet, shared: bool, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.shared = shared
        L = len(rs.R_ffn)
        if shared:
            self.R = nn.Parameter(rs.R_attn[0].to(dtype).clone())
        else:
            self.attn = nn.ParameterList([nn.Parameter(r.to(dtype).clone()) for r in rs.R_attn])
            self.ffn = nn.ParameterList([nn.Parameter(r.to(dtype).clone()) for r in rs.R_ffn])
        self.head = nn.ParameterList(
            [nn.Parameter(rs.R_head[i].to(dtype).clone()) for i in range(L)]
        )

    def Ra(self, i: int) -> Tensor:
        return self.R if self.shared else self.attn[i]

    def Rf(self, i: int) -> Tensor:
        return self.R if self.shared else self.ffn[i]

    def to_set(self, seed: int, method: str) -> RotationSet:
        L = len(self.head)
        f = lambda t: polar(t.detach().double().cpu())  # noqa: E731
        if self.shared:
            R = f(self.R)
            return RotationSet([R] * (L + 1), [R] * L, [f(h) for h in self.head], seed, method)
        return RotationSet(
            [f(r) for r in self.attn],
            [f(r) for r in self.ffn],
            [f(h) for h in self.head],
            seed,
            method,
        )


class _WQ:
    """Weight fake-quantiser with STE (scale from the clip search, no gradient)."""

    def __init__(self, q: QuantConfig, bits: int):
        self.q, self.bits = q, bits

    def __call__(self, w: Tensor) -> Tensor:
        if self.bits >= 16:
            return w
        q = self.q
        g = q.w_groupsize
        shape = w.shape
        wg = w if g == -1 else w.reshape(shape[0], shape[1] // g, g)
        with torch.no_grad():
            s = weight_scale(
                wg.detach(), self.bits, clip=q.w_clip, clip_min=q.w_clip_min, grid=q.w_clip_grid
            )
            wmax = wg.detach().abs().amax(dim=-1, keepdim=True)
            ratio = s / torch.where(wmax > 0, wmax, torch.ones_like(wmax))
        # clip ratio picked without gradient; the scale itself stays differentiable (max |w|)
        scale = ratio * wg.abs().amax(dim=-1, keepdim=True)
        scale = torch.where(scale > 0, scale, s)
        return quantize_sym(wg, self.bits, scale, round_ste).reshape(shape)


class RotQLinear(nn.Module):
    """One linear of the un-fused training forward (see module docstring)."""

    def __init__(
        self,
        base: nn.Linear,
        kind: str,
        i: int,
        params: RotParams,
        dims: Dims,
        act: ActQuantizer,
        wq: _WQ,
        had: OnlineHadamard | None,
    ):
        super().__init__()
        self.base, self.kind, self.i, self.dims = base, kind, i, dims
        self.act, self.wq, self.had = act, wq, had
        self._params = [params]  # not a submodule: parameters live in RotParams

    def forward(self, x: Tensor) -> Tensor:
        p, i, d = self._params[0], self.i, self.dims
        ct = torch.promote_types(self.base.weight.dtype, torch.float32)
        W = self.base.weight.to(ct)
        b = None if self.base.bias is None else self.base.bias.to(ct)
        x = x.to(ct)
        back = None
        if self.kind in ("q", "k", "v"):
            R = p.Ra(i)
            x, W = x @ R, W @ R
            if self.kind == "v":
                Rh = p.head[i]
                W = torch.einsum("ji,hjk->hik", Rh, W.reshape(d.kv_heads, d.head_dim, -1)).reshape(
                    d.kv_heads * d.head_dim, -1
                )
                if b is not None:
                    b = (b.reshape(d.kv_heads, d.head_dim) @ Rh).reshape(-1)
        elif self.kind == "o":
            Rf, Rh = p.Rf(i), p.head[i]
            W = torch.einsum("ohj,jk->ohk", W.reshape(W.shape[0], d.heads, d.head_dim), Rh).reshape(
                W.shape[0], -1
            )
            W = Rf.T @ W
            b = None if b is None else b @ Rf
            back = Rf
        elif self.kind in ("gate", "up"):
            R = p.Rf(i)
            x, W = x @ R, W @ R
        elif self.kind == "down":
            Rn = p.Ra(i + 1)
            if self.had is not None:
                x, W = self.had(x), self.had(W)
            W = Rn.T @ W
            b = None if b is None else b @ Rn
            back = Rn
        xq = self.act(x, round_ste)
        y = nn.functional.linear(xq, self.wq(W), b)
        if back is not None:
            y = y @ back.T
        return y.to(self.base.weight.dtype)


KINDS = (
    ("self_attn", "q_proj", "q"),
    ("self_attn", "k_proj", "k"),
    ("self_attn", "v_proj", "v"),
    ("self_attn", "o_proj", "o"),
    ("mlp", "gate_proj", "gate"),
    ("mlp", "up_proj", "up"),
    ("mlp", "down_proj", "down"),
)


def training_model(
    model: nn.Module,
    rs: RotationSet,
    q: QuantConfig,
    *,
    shared: bool,
    w_bits: int,
    online_had_down: bool = True,
    online_had_qk: bool | None = None,
    online_dense: bool = False,
    online_block: bool = False,
) -> tuple[nn.Module, RotParams]:
    """A frozen, norm-fused copy of ``model`` running the un-fused rotated forward."""
    d = check_model(model)
    m = copy.deepcopy(model)
    fuse_norms(m)
    for prm in m.parameters():
        prm.requires_grad_(False)
    wdt = next(m.parameters()).dtype
    params = RotParams(rs, shared, torch.float64 if wdt == torch.float64 else torch.float32)
    params.to(next(m.parameters()).device)
    act = ActQuantizer(q.a_bits, q.a_groupsize, q.a_sym, q.a_clip_ratio)
    wq = _WQ(q, w_bits)
    had = make_had_down(m, online_had_down, online_dense, block=online_block)
    for i, layer in enumerate(layers(m)):
        for blk, name, kind in KINDS:
            parent = getattr(layer, blk)
            setattr(
                parent, name, RotQLinear(getattr(parent, name), kind, i, params, d, act, wq, had)
            )
    had_qk = q.k_bits < 16 if online_had_qk is None else online_had_qk
    attach_kv_quant(m, q.k_bits, q.v_bits, q.kv_groupsize, q.kv_sym, had_qk, use_ste=True)
    m.train(False)
    return m, params


def _lm_loss(m: nn.Module, ids: Tensor) -> Tensor:
    logits = m(ids).logits[:, :-1].float()
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


@torch.no_grad()
def cayley_step(R: Tensor, G: Tensor, lr: float) -> None:
    """One Cayley SGD step on the Stiefel manifold (SpinQuant's SGDG, momentum 0), in place.

    Omega = (G R^T - R G^T) / 2; alpha = min(lr, 1 / (||Omega||_1 + 1e-8));
    R <- (I + alpha/2 Omega)^{-1} (I - alpha/2 Omega) R.
    """
    R64, G64 = R.double(), G.double()  # float64 solve: float32 drift stays ~1e-6 over 100 steps
    Om = 0.5 * (G64 @ R64.T - R64 @ G64.T)
    alpha = min(lr, 1.0 / (float(torch.linalg.matrix_norm(Om, ord=1)) + 1e-8))
    eye = torch.eye(R.shape[0], dtype=torch.float64, device=R.device)
    R.copy_(torch.linalg.solve(eye + 0.5 * alpha * Om, (eye - 0.5 * alpha * Om) @ R64).to(R.dtype))


def learn_rotations(
    model: nn.Module,
    calib_ids: Tensor,
    rot: RotationConfig,
    q: QuantConfig,
    *,
    progress: bool | Callable[[int, float], Any] | None = None,
    shared: bool | None = None,
    init: RotationSet | None = None,
) -> RotationSet:
    """Learn rotations with Cayley SGD on next-token cross-entropy.

    ``rot.method`` 'spinquant' learns one global R (shared), 'respin' one R per slot.
    Returns polar-orthonormalised float64 rotations; ``info`` holds the loss history, drift from
    the initialisation and wall-clock seconds.
    """
    d = check_model(model)
    if calib_ids.ndim != 2:
        raise CalibrationDataError(
            f"calib_ids must be [N, T] token ids, got shape {tuple(calib_ids.shape)}"
        )
    n, t = calib_ids.shape
    if t < rot.calib_seqlen:
        raise CalibrationDataError(
            f"calibration sequences have {t} tokens, fewer than calib_seqlen={rot.calib_seqlen}: "
            "pass longer sequences or lower calib_seqlen"
        )
    if n < min(rot.calib_nsamples, rot.batch_size) or n < rot.batch_size:
        raise CalibrationDataError(
            f"{n} calibration sequences are fewer than batch_size={rot.batch_size}: pass more data"
        )
    calib = calib_ids[: rot.calib_nsamples, : rot.calib_seqlen]
    method = rot.method if rot.method in ("spinquant", "respin") else "respin"
    if shared is None:
        shared = method == "spinquant"
    rs0 = init if init is not None else init_rotations(model, method, rot.rotation_seed)
    w_bits = rot.train_w_bits
    if w_bits is None:
        w_bits = 16 if q.weight_quantizer == "gptq" else q.w_bits
    m, params = training_model(
        model,
        rs0,
        q,
        shared=shared,
        w_bits=w_bits,
        online_had_down=rot.online_had_down,
        online_had_qk=rot.online_had_qk,
        online_dense=rot.online_dense,
        online_block=rot.online_block,
    )
    g = torch.Generator().manual_seed(rot.seed)
    history: list[float] = []
    t0 = time.perf_counter()
    bar = tqdm(range(rot.steps), desc=f"learn {method}", disable=progress is not True)
    dev = next(model.parameters()).device
    for step in bar:
        lr = rot.lr
        if rot.lr_schedule == "cosine":
            lr = 0.5 * rot.lr * (1 + math.cos(math.pi * step / max(rot.steps, 1)))
        idx = torch.randperm(calib.shape[0], generator=g)[: rot.batch_size]
        loss = _lm_loss(m, calib[idx].to(dev))
        params.zero_grad(set_to_none=True)
        loss.backward()
        for prm in params.parameters():
            if prm.grad is not None:
                cayley_step(prm.data, prm.grad, lr)
        history.append(float(loss.detach()))
        bar.set_postfix(loss=f"{history[-1]:.4f}")
        if callable(progress):
            progress(step, history[-1])
    rs = params.to_set(rot.rotation_seed, method)
    drift = [
        float(torch.linalg.norm(a - b) / torch.linalg.norm(b))
        for a, b in zip(rs.R_attn + rs.R_ffn, rs0.R_attn + rs0.R_ffn, strict=True)
    ]
    rs.info = {
        "loss_history": history,
        "seconds": time.perf_counter() - t0,
        "rel_drift_mean": sum(drift) / len(drift),
        "rel_drift_max": max(drift),
        "trainable_params": sum(p.numel() for p in params.parameters()),
        "dims": d.__dict__,
    }
    return rs
