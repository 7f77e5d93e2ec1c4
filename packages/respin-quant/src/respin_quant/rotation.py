"""Rotation slots, offline fusion and ReSpinQuant's residual subspace rotation.

Spec sections 2.1 (computational invariance: fuse RMSNorm weights, rotate every slot),
2.2 (residual transitions T_attn[i] = R_attn[i]^T R_ffn[i], T_ffn[i] = R_ffn[i]^T R_attn[i+1])
and 2.4 (T ~ T_hat = I + Q (R_sub - I) Q^T, applied online as h + ((h Q) M) Q^T).
Convention: activations are row vectors, y = x W^T; input-side rotation W <- W R, output-side
W <- R^T W. All fusion arithmetic runs in float64 and is cast back to the model dtype.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor, nn

from respin_quant.arch import Dims, check_model, get_state, layers, require_fresh, untie_lm_head
from respin_quant.errors import RespinConfigError, RotationError
from respin_quant.hadamard import OnlineHadamard, random_hadamard

ORTHO_TOL = 1e-4


@dataclass
class RotationSet:
    """Every mergeable rotation of a model (float64).

    ``R_attn`` has L + 1 entries (the last is R_final, lm_head's input basis), ``R_ffn`` and
    ``R_head`` have L. Global methods have R_attn[i] = R_ffn[i] = R for all i.
    """

    R_attn: list[Tensor]
    R_ffn: list[Tensor]
    R_head: list[Tensor]
    seed: int = 0
    method: str = "respin"
    info: dict[str, Any] = field(default_factory=dict)

    def transitions(self) -> list[Tensor]:
        """[T_attn[0], T_ffn[0], T_attn[1], ...] (2L matrices)."""
        out = []
        for i in range(len(self.R_ffn)):
            out.append(self.R_attn[i].T @ self.R_ffn[i])
            out.append(self.R_ffn[i].T @ self.R_attn[i + 1])
        return out

    def all_matrices(self) -> dict[str, Tensor]:
        d = {f"R_attn.{i}": r for i, r in enumerate(self.R_attn)}
        d.update({f"R_ffn.{i}": r for i, r in enumerate(self.R_ffn)})
        d.update({f"R_head.{i}": r for i, r in enumerate(self.R_head)})
        return d

    def orthogonality_error(self) -> float:
        """max over matrices of max |R^T R - I|."""
        err = 0.0
        for r in self.all_matrices().values():
            r64 = r.double()
            eye = torch.eye(r.shape[0], dtype=torch.float64)
            err = max(err, float((r64.T @ r64 - eye).abs().max()))
        return err

    def n_params(self) -> int:
        """Distinct trainable rotation parameters (shared matrices counted once)."""
        seen: set[int] = set()
        n = 0
        for r in self.all_matrices().values():
            if id(r) not in seen:
                seen.add(id(r))
                n += r.numel()
        return n

    def save(self, path: str | Path) -> None:
        from safetensors.torch import save_file

        tensors = {
            k: v.detach().double().contiguous().clone() for k, v in self.all_matrices().items()
        }
        save_file(tensors, str(path), metadata={"seed": str(self.seed), "method": self.method})

    @classmethod
    def load(cls, path: str | Path, model: nn.Module | None = None) -> RotationSet:
        """Load ``rotations.safetensors``; checks orthogonality and (with ``model``) shapes."""
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            t = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open is not iterable)
        n_attn = sum(k.startswith("R_attn.") for k in t)
        try:
            rs = cls(
                R_attn=[t[f"R_attn.{i}"] for i in range(n_attn)],
                R_ffn=[t[f"R_ffn.{i}"] for i in range(n_attn - 1)],
                R_head=[t[f"R_head.{i}"] for i in range(n_attn - 1)],
                seed=int(meta.get("seed", 0)),
                method=meta.get("method", "respin"),
            )
        except KeyError as e:
            raise RotationError(f"{path}: missing rotation {e.args[0]!r}") from None
        if model is not None:
            rs.check_fits(check_model(model))
        err = rs.orthogonality_error()
        if err > ORTHO_TOL:
            raise RotationError(
                f"{path}: rotations are not orthogonal (max |R^T R - I| = {err:.2e})"
            )
        return rs

    def check_fits(self, d: Dims) -> None:
        if len(self.R_attn) != d.layers + 1 or len(self.R_ffn) != d.layers:
            raise RotationError(
                f"rotation set has {len(self.R_ffn)} layers, the model has {d.layers}"
            )
        for r in self.R_attn + self.R_ffn:
            if tuple(r.shape) != (d.hidden, d.hidden):
                raise RotationError(
                    f"residual rotation of shape {tuple(r.shape)} does not fit hidden size {d.hidden}"
                )
        for r in self.R_head:
            if tuple(r.shape) != (d.head_dim, d.head_dim):
                raise RotationError(
                    f"head rotation of shape {tuple(r.shape)} does not fit head dim {d.head_dim}"
                )


def init_rotations(model: nn.Module, method: str = "respin", seed: int = 0) -> RotationSet:
    """Initial rotations: every residual basis = the same random Hadamard H.

    One shared sign vector makes every transition exactly I at step 0; R_head are independent
    random Hadamards of the head dim. ``method='none'`` gives identities.
    """
    d = check_model(model)
    if method == "none":
        eye = torch.eye(d.hidden, dtype=torch.float64)
        eh = torch.eye(d.head_dim, dtype=torch.float64)
        return RotationSet([eye] * (d.layers + 1), [eye] * d.layers, [eh] * d.layers, seed, method)
    if method not in ("quarot", "spinquant", "respin"):
        raise RespinConfigError(f"method={method!r}: use none, quarot, spinquant or respin")
    g = torch.Generator().manual_seed(seed)
    H = random_hadamard(d.hidden, g)
    heads = [random_hadamard(d.head_dim, g) for _ in range(d.layers)]
    return RotationSet(
        [H.clone() for _ in range(d.layers + 1)],
        [H.clone() for _ in range(d.layers)],
        heads,
        seed,
        method,
    )


def polar(R: Tensor) -> Tensor:
    """Nearest orthogonal matrix (polar factor, float64)."""
    u, _, vh = torch.linalg.svd(R.double())
    return u @ vh


def approximate_transition(T: Tensor, r: int) -> tuple[Tensor, Tensor]:
    """Residual subspace rotation: (Q [D, r], M = R_sub - I_r [r, r]).

    Q spans the top-r left singular vectors of T - I; R_sub is the polar factor of Q^T T Q,
    so T_hat = I + Q M Q^T is exactly orthogonal, equals I for r = 0 and T for r = D.
    """
    D = T.shape[0]
    if T.ndim != 2 or T.shape[1] != D:
        raise RespinConfigError(f"transition must be square, got shape {tuple(T.shape)}")
    if not isinstance(r, int) or not 0 <= r <= D:
        raise RespinConfigError(f"residual_rank={r!r} must be an integer in 0..{D} (or 'full')")
    T64 = T.double()
    eye = torch.eye(D, dtype=torch.float64)
    if r == 0:
        return torch.zeros(D, 0, dtype=torch.float64), torch.zeros(0, 0, dtype=torch.float64)
    U, _, _ = torch.linalg.svd(T64 - eye)
    Q = U[:, :r]
    us, _, vsh = torch.linalg.svd(Q.T @ T64 @ Q)
    M = us @ vsh - torch.eye(r, dtype=torch.float64)
    return Q, M


def transition_hat(Q: Tensor, M: Tensor) -> Tensor:
    """T_hat = I + Q M Q^T."""
    return torch.eye(Q.shape[0], dtype=Q.dtype) + Q @ M @ Q.T


def resolve_rank(rank: int | Literal["full"], D: int) -> int:
    if rank == "full":
        return D
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank <= D:
        raise RespinConfigError(f"residual_rank={rank!r} must be an integer in 0..{D} or 'full'")
    return rank


# ----------------------------------------------------------------------------- norm fusion


@torch.no_grad()
def fuse_norms(model: nn.Module, center_embeddings: bool = False) -> None:
    """Fold every RMSNorm weight g into the next linears and set g = 1.

    Unties lm_head first. ``center_embeddings`` (QuaRot/SpinQuant) subtracts each embedding
    row's mean; it changes the function of RMSNorm models and is off by default.
    """
    check_model(model)
    st = get_state(model)
    untie_lm_head(model)
    if st.get("norms_fused"):
        return
    inner = model.model

    def fold(lin: nn.Linear, g: Tensor) -> None:
        lin.weight.copy_((lin.weight.double() * g.double().unsqueeze(0)).to(lin.weight.dtype))

    for layer in layers(model):
        g = layer.input_layernorm.weight
        for lin in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
            fold(lin, g)
        g.fill_(1.0)
        g = layer.post_attention_layernorm.weight
        for lin in (layer.mlp.gate_proj, layer.mlp.up_proj):
            fold(lin, g)
        g.fill_(1.0)
    fold(model.lm_head, inner.norm.weight)
    inner.norm.weight.fill_(1.0)
    if center_embeddings:
        E = inner.embed_tokens.weight
        E.copy_((E.double() - E.double().mean(dim=1, keepdim=True)).to(E.dtype))
    st["norms_fused"] = True


def _blockdiag_out(W: Tensor, R: Tensor, n: int) -> Tensor:
    # rows grouped by head: W [n*dh, in] -> blockdiag(R)^T W
    dh = R.shape[0]
    return torch.einsum("ji,hjk->hik", R, W.reshape(n, dh, -1)).reshape(n * dh, -1)


def _blockdiag_in(W: Tensor, R: Tensor, n: int) -> Tensor:
    # columns grouped by head: W [out, n*dh] -> W blockdiag(R)
    dh = R.shape[0]
    return torch.einsum("ohj,jk->ohk", W.reshape(W.shape[0], n, dh), R).reshape(W.shape[0], -1)


@torch.no_grad()
def fuse_bases(
    model: nn.Module,
    R_attn: list[Tensor],
    R_ffn: list[Tensor],
    R_head: list[Tensor] | None,
    had_down: OnlineHadamard | None = None,
) -> None:
    """Fold residual bases, head rotations and the down_proj Hadamard into the weights."""
    d = check_model(model)

    def setw(p: Tensor, v: Tensor) -> None:
        p.copy_(v.to(p.dtype))

    E = model.model.embed_tokens.weight
    dev = E.device
    R_attn = [r.to(device=dev, dtype=torch.float64) for r in R_attn]
    R_ffn = [r.to(device=dev, dtype=torch.float64) for r in R_ffn]
    if R_head is not None:
        R_head = [r.to(device=dev, dtype=torch.float64) for r in R_head]
    setw(E, E.double() @ R_attn[0])
    for i, layer in enumerate(layers(model)):
        Ra, Rf, Rn = R_attn[i].double(), R_ffn[i].double(), R_attn[i + 1].double()
        at, mlp = layer.self_attn, layer.mlp
        for lin in (at.q_proj, at.k_proj):
            setw(lin.weight, lin.weight.double() @ Ra)
        Wv = at.v_proj.weight.double() @ Ra
        if R_head is not None:
            Rh = R_head[i].double()
            Wv = _blockdiag_out(Wv, Rh, d.kv_heads)
            if at.v_proj.bias is not None:
                b = at.v_proj.bias.double().reshape(d.kv_heads, d.head_dim) @ Rh
                setw(at.v_proj.bias, b.reshape(-1))
        setw(at.v_proj.weight, Wv)
        Wo = Rf.T @ at.o_proj.weight.double()
        if R_head is not None:
            Wo = _blockdiag_in(Wo, R_head[i].double(), d.heads)
        setw(at.o_proj.weight, Wo)
        if at.o_proj.bias is not None:
            setw(at.o_proj.bias, at.o_proj.bias.double() @ Rf)
        for lin in (mlp.gate_proj, mlp.up_proj):
            setw(lin.weight, lin.weight.double() @ Rf)
        Wd = Rn.T @ mlp.down_proj.weight.double()
        if had_down is not None:
            Wd = had_down(Wd)
        setw(mlp.down_proj.weight, Wd)
        if mlp.down_proj.bias is not None:
            setw(mlp.down_proj.bias, mlp.down_proj.bias.double() @ Rn)
    W = model.lm_head.weight
    setw(W, W.double() @ R_attn[-1].double())


# ----------------------------------------------------------------------------- online hooks


@dataclass
class Transition:
    """One online residual correction h <- h + ((h Q) M) Q^T (dense: h <- h + h M)."""

    Q: Tensor | None
    M: Tensor
    rank: int
    _cache: tuple[Tensor, Tensor] | None = field(default=None, repr=False, compare=False)

    def _factors(self, h: Tensor) -> tuple[Tensor, Tensor]:
        """(P, Q^T) with P = Q M in h's dtype/device, cast once and kept (dense: (M, I))."""
        c = self._cache
        if c is None or c[0].dtype != h.dtype or c[0].device != h.device:
            M = self.M.to(device=h.device)
            if self.Q is None:
                c = (M.to(h.dtype), torch.empty(0))
            else:
                Q = self.Q.to(device=h.device)
                # P = Q M in the stored precision, then cast: one rounding instead of two
                c = ((Q @ M).to(h.dtype), Q.T.to(h.dtype).contiguous())
            self._cache = c
        return c

    def __call__(self, h: Tensor) -> Tensor:
        P, Qt = self._factors(h)
        if self.Q is None:
            return h @ P
        return (h @ P) @ Qt

    def add_to(self, out: Tensor, h: Tensor) -> Tensor:
        """``out + self(h)``; in place (one fused addmm) when no gradient is recorded."""
        if torch.is_grad_enabled() or not out.is_contiguous() or out.shape != h.shape:
            return out + self(h)
        P, Qt = self._factors(h)
        o2, h2 = out.view(-1, out.shape[-1]), h.reshape(-1, h.shape[-1])
        if self.Q is None:
            o2.addmm_(h2, P)
        else:
            o2.addmm_(h2 @ P, Qt)
        return out

    @property
    def is_identity(self) -> bool:
        return self.M.numel() == 0 or bool(self.M.abs().max() == 0)

    def macs_per_token(self) -> int:
        D = self.M.shape[0] if self.Q is None else self.Q.shape[0]
        if self.is_identity:
            return 0
        return D * D if self.Q is None else 2 * D * self.rank + self.rank * self.rank


@dataclass
class OnlineState:
    """Online parts of a rotated model: transitions, the down_proj Hadamard, hook handles."""

    attn: list[Transition]
    ffn: list[Transition]
    rank: int
    had_down: OnlineHadamard | None
    handles: list[Any] = field(default_factory=list)

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()

    def macs_per_token(self, dims: Dims) -> dict[str, int]:
        tr = sum(t.macs_per_token() for t in self.attn + self.ffn)
        had = 0
        if self.had_down is not None:
            n, b = self.had_down.n, self.had_down.block
            had = n * n if self.had_down.mode == "dense" else n * max(1, b.bit_length() - 1)
            had *= dims.layers
        lin = dims.layers * (
            2 * dims.hidden * dims.heads * dims.head_dim
            + 2 * dims.hidden * dims.kv_heads * dims.head_dim
            + 3 * dims.hidden * dims.intermediate
        )
        return {"transition_macs": tr, "had_down_ops": had, "linear_macs": lin}


def attach_online(model: nn.Module, state: OnlineState) -> None:
    """Register the transition hooks and the down_proj Hadamard pre-hook."""
    for i, layer in enumerate(layers(model)):
        for norm, block, tr in (
            (layer.input_layernorm, layer.self_attn, state.attn[i]),
            (layer.post_attention_layernorm, layer.mlp, state.ffn[i]),
        ):
            if tr.is_identity:
                continue
            box: dict[str, Tensor] = {}

            def record(_m: nn.Module, args: tuple[Any, ...], box: dict[str, Tensor] = box) -> None:
                box["h"] = args[0]

            def add(
                _m: nn.Module, _a: Any, out: Any, box: dict[str, Tensor] = box, tr: Transition = tr
            ) -> Any:
                h = box.pop("h")
                if isinstance(out, tuple):
                    return (tr.add_to(out[0], h), *out[1:])
                return tr.add_to(out, h)

            state.handles.append(norm.register_forward_pre_hook(record))
            state.handles.append(block.register_forward_hook(add))
        if state.had_down is not None:
            had = state.had_down

            def pre(_m: nn.Module, args: tuple[Any, ...], had: OnlineHadamard = had) -> Any:
                return (had(args[0]), *args[1:])

            state.handles.append(layer.mlp.down_proj.register_forward_pre_hook(pre))
    model._respin_online = state  # type: ignore[assignment]


def online_state(model: nn.Module) -> OnlineState | None:
    return getattr(model, "_respin_online", None)


def make_had_down(
    model: nn.Module, enabled: bool, dense: bool = False, seed: int = 0, block: bool = False
) -> OnlineHadamard | None:
    if not enabled:
        return None
    d = check_model(model)
    return OnlineHadamard(d.intermediate, dense=dense, block=block, seed=seed, what="online H_down")


@torch.no_grad()
def apply_rotations(
    model: nn.Module,
    rs: RotationSet,
    residual_rank: int | Literal["full"] = 32,
    rebase: bool = False,
    *,
    online_had_down: bool = True,
    online_dense: bool = False,
    online_block: bool = False,
    center_embeddings: bool = False,
) -> nn.Module:
    """Fuse a rotation set into ``model`` in place and attach the online hooks.

    Paper mode (``rebase=False``): the blocks keep the learned bases, every transition T is
    replaced by its rank-r subspace rotation (r = 'full' is exact). ``rebase=True`` redefines the
    bases sequentially so the full-precision function is exactly preserved for any r.
    """
    d = check_model(model)
    require_fresh(model, "apply rotations")
    rs.check_fits(d)
    r = resolve_rank(residual_rank, d.hidden)
    fuse_norms(model, center_embeddings=center_embeddings)
    R_attn = [polar(x) for x in rs.R_attn]
    R_ffn = [polar(x) for x in rs.R_ffn]
    R_head = [polar(x) for x in rs.R_head]
    eye = torch.eye(d.hidden, dtype=torch.float64)

    def make(T: Tensor) -> tuple[Transition, Tensor]:
        if float((T - eye).abs().max()) < 1e-12:
            return Transition(None, torch.zeros(0, 0, dtype=torch.float64), 0), eye
        if r == d.hidden:
            return Transition(None, T - eye, r), T
        Q, M = approximate_transition(T, r)
        return Transition(Q, M, r), transition_hat(Q, M)

    attn: list[Transition] = []
    ffn: list[Transition] = []
    if rebase:
        Ra = [R_attn[0]]
        Rf: list[Tensor] = []
        for i in range(d.layers):
            t, that = make(Ra[i].T @ R_ffn[i])
            attn.append(t)
            Rf.append(polar(Ra[i] @ that))
            t, that = make(Rf[i].T @ R_attn[i + 1])
            ffn.append(t)
            Ra.append(polar(Rf[i] @ that))
        R_attn, R_ffn = Ra, Rf
    else:
        for i in range(d.layers):
            attn.append(make(R_attn[i].T @ R_ffn[i])[0])
            ffn.append(make(R_ffn[i].T @ R_attn[i + 1])[0])
    had = make_had_down(model, online_had_down, online_dense, block=online_block)
    fuse_bases(model, R_attn, R_ffn, R_head, had)
    state = OnlineState(attn, ffn, r, had)
    attach_online(model, state)
    st = get_state(model)
    st.update(
        rotated=True,
        method=rs.method,
        residual_rank=r,
        rebase=bool(rebase),
        online_had_down=bool(online_had_down),
        online_dense=bool(online_dense),
        online_block=bool(online_block),
    )
    model._respin_rotations = RotationSet(R_attn, R_ffn, R_head, rs.seed, rs.method)  # type: ignore[assignment]
    return model


def transition_report(rs: RotationSet, ranks: list[int]) -> dict[str, Any]:
    """Relative drift of each basis from the shared init and ||T_hat - T||_F per rank."""
    Ts = rs.transitions()
    out: dict[str, Any] = {}
    for r in ranks:
        errs = []
        for T in Ts:
            Q, M = approximate_transition(T, min(r, T.shape[0]))
            errs.append(float(torch.linalg.norm(transition_hat(Q, M) - T.double())))
        out[str(r)] = {"mean_fro_err": sum(errs) / len(errs), "max_fro_err": max(errs)}
    return out


def dump_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, default=str)
