"""Parametric editors: FT-L/FT-M, ROME, MEMIT and AlphaEdit, and the :class:`EditHandle` that
records exactly which tensors changed, restores them bit-identically and saves only them."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from edit_collapse import core
from edit_collapse.config import EditConfig, auto_module_templates, check_model, easyedit_defaults
from edit_collapse.errors import EditDivergedError, EditInputError, StaleStatsError
from edit_collapse.requests import EditRequest


@dataclass
class EditHandle:
    """The edits applied to ``model``: original copies of every changed tensor. ``v_star`` holds
    one record per request of a v*/z* search (ROME, MEMIT, AlphaEdit): ``case_id``, final target
    ``nll`` and ``target_prob``, ``steps``, ``reached`` and the ``threshold``
    (:func:`edit_collapse.core.optimize_target`); :meth:`v_star_missed` counts the misses."""

    model: Any
    originals: dict[str, torch.Tensor] = field(default_factory=dict)
    time_s: float = 0.0
    n_requests: int = 0
    editor: str = ""
    on_restore: list[Callable[[], None]] = field(default_factory=list)
    v_star: list[dict[str, Any]] = field(default_factory=list)

    def remember(self, name: str) -> None:
        if name not in self.originals:
            self.originals[name] = self.model.get_parameter(name).detach().clone()

    def merge(self, other: EditHandle) -> EditHandle:
        """Fold a later handle into this one (the earliest originals win)."""
        for k, v in other.originals.items():
            self.originals.setdefault(k, v)
        self.time_s += other.time_s
        self.n_requests += other.n_requests
        self.v_star += other.v_star
        self.on_restore += [f for f in other.on_restore if f not in self.on_restore]
        return self

    @torch.no_grad()
    def restore(self) -> None:
        """Copy the original tensors back (bit-identical)."""
        for k, v in self.originals.items():
            self.model.get_parameter(k).copy_(v)
        for f in self.on_restore:
            f()

    @torch.no_grad()
    def delta_norms(self) -> dict[str, float]:
        """Frobenius norm of ``W_now - W_orig`` per changed tensor."""
        return {
            k: float((self.model.get_parameter(k).float() - v.float()).norm())
            for k, v in self.originals.items()
        }

    def changed(self) -> dict[str, torch.Tensor]:
        return {
            k: self.model.get_parameter(k).detach().cpu().clone().contiguous()
            for k in self.originals
        }

    def v_star_missed(self) -> int:
        """How many v*/z* searches ended above their target threshold."""
        return sum(not r["reached"] for r in self.v_star)

    def delta_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.originals.values())

    @torch.no_grad()
    def save(self, path: str | Path) -> Path:
        """Write the changed tensors (only those) as safetensors with the base weights' sha256."""
        from safetensors.torch import save_file

        from llmcore.zoo import weights_digest

        new = self.changed()
        self.restore()
        base = weights_digest(self.model)
        for k, v in new.items():
            self.model.get_parameter(k).copy_(v)
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        meta = {"base_sha256": base, "editor": self.editor, "n_requests": str(self.n_requests),
                "base_model": str(getattr(self.model.config, "name_or_path", ""))}  # fmt: skip
        save_file(new, str(p), metadata=meta)
        return p

    @classmethod
    @torch.no_grad()
    def load(cls, model: Any, path: str | Path) -> EditHandle:
        """Apply saved edits to ``model`` (its weights must hash to the recorded base)."""
        from safetensors import safe_open

        from llmcore.zoo import weights_digest

        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            if meta.get("base_sha256") and meta["base_sha256"] != weights_digest(model):
                raise StaleStatsError(
                    f"{str(path)!r} edits a model with weights sha256 {meta['base_sha256'][:16]}..., "
                    "not this one; load the base model it was made from"
                )
            h = cls(model, editor=meta.get("editor", ""), n_requests=int(meta.get("n_requests", 0)))
            for k in f.keys():  # noqa: SIM118  (safe_open has no __iter__)
                h.remember(k)
                model.get_parameter(k).copy_(f.get_tensor(k))
        return h


class Editor:
    """Base class: ``apply(model, tok, requests, sequential=True) -> EditHandle``."""

    name = "editor"
    parametric = True
    batchable = False

    def __init__(self, cfg: EditConfig | None = None, stats_texts: Sequence[str] | None = None,
                 stats_cache_dir: str | Path | None = None) -> None:  # fmt: skip
        self.cfg = cfg or easyedit_defaults(self.alg)
        self.stats_texts = list(stats_texts) if stats_texts is not None else None
        self.stats_cache_dir = stats_cache_dir or (self.cfg.stats_dir or None)
        self._templates: list[str] | None = None
        self._stats: dict[int, torch.Tensor] = {}
        self._digest: str | None = None

    alg = "ROME"

    def setup(self, model: Any, tok: Any) -> None:
        check_model(model)
        self.cfg = auto_module_templates(model, self.cfg)
        for layer in self.cfg.layers:  # quantised or frozen targets fail before any forward pass
            core.weight_of(model, self.cfg.rewrite_module_tmp.format(layer))
        if self._digest is None:
            from llmcore.zoo import weights_digest

            self._digest = weights_digest(model)  # statistics belong to the unedited weights

    def templates(self, model: Any, tok: Any) -> list[str]:
        if self._templates is None:
            self._templates = core.context_templates(
                model, tok, self.cfg.context_template_length_params, self.cfg.seed
            )
        return self._templates

    def stats(self, model: Any, tok: Any, layer: int) -> torch.Tensor:
        """``E[k k^T]`` at the rewrite module of ``layer`` (of the unedited model)."""
        if layer not in self._stats:
            texts = self.stats_texts
            if texts is None:
                texts = _default_stats_texts(self.cfg)
            self._stats[layer] = core_stats(model, tok, self, layer, texts)
        return self._stats[layer]

    def check_requests(self, tok: Any, requests: Sequence[EditRequest]) -> None:
        if not requests:
            raise EditInputError("no edit requests given")
        for r in requests:
            core.lookup_index(tok, r.prompt, r.subject, self.cfg.fact_token, r.case_id)
            core.target_ids(tok, r.target_new)

    def apply(
        self, model: Any, tok: Any, requests: Sequence[EditRequest], sequential: bool = True
    ) -> EditHandle:
        """Edit ``model`` in place. ``sequential=True`` applies the requests one after another
        (cumulative); ``False`` applies them as one batch (MEMIT/AlphaEdit/FT only)."""
        self.setup(model, tok)
        self.check_requests(tok, requests)
        if not sequential and len(requests) > 1 and not self.batchable:
            raise EditInputError(
                f"{self.name} edits one fact at a time; use sequential=True (or MEMIT/AlphaEdit "
                f"for batch edits of {len(requests)} requests)"
            )
        for layer in self.stats_layers():  # C_0 of the unedited weights, before any update
            self.stats(model, tok, layer)
        h = EditHandle(model, editor=self.name)
        self._attach(h)
        t0 = time.perf_counter()
        batches = [[r] for r in requests] if sequential else [list(requests)]
        for b in batches:
            self._edit(model, tok, b, h)
            h.n_requests += len(b)
        h.time_s = time.perf_counter() - t0
        return h

    def stats_layers(self) -> list[int]:
        """Layers whose statistics the update uses (computed before the first edit)."""
        return []

    def _attach(self, h: EditHandle) -> None:
        pass

    def _edit(self, model: Any, tok: Any, batch: list[EditRequest], h: EditHandle) -> None:
        raise NotImplementedError

    def _add(self, model: Any, h: EditHandle, layer: int, delta: torch.Tensor, what: str) -> None:
        name = self.cfg.rewrite_module_tmp.format(layer)
        w = core.weight_of(model, name)
        d = core.as_out_in(model, name, delta).to(w.dtype)
        core.check_update(d, f"{self.name} at {name}")
        h.remember(name + ".weight")
        with torch.no_grad():
            w.add_(d)


def _default_stats_texts(cfg: EditConfig) -> list[str]:
    """Texts of ``mom2_dataset`` through ``datasets`` (network on first use)."""
    try:
        from datasets import load_dataset
    except ImportError as e:  # pragma: no cover
        raise EditInputError("statistics need stats_texts=... or the datasets package") from e
    name = {
        "wikipedia": ("wikitext", "wikitext-103-raw-v1"),
        "wikitext": ("wikitext", "wikitext-103-raw-v1"),
    }
    if cfg.mom2_dataset not in name:
        raise EditInputError(
            f"mom2_dataset={cfg.mom2_dataset!r}: pass stats_texts=[...] to the editor or use 'wikipedia'"
        )
    ds = load_dataset(*name[cfg.mom2_dataset], split="train", streaming=True)
    out, n = [], 0
    for row in ds:
        t = row["text"].strip()
        if t:
            out.append(t[:2000])
            n += len(t.split())
        if n >= cfg.mom2_n_samples:
            break
    return out


def core_stats(
    model: Any, tok: Any, editor: Editor, layer: int, texts: Sequence[str]
) -> torch.Tensor:
    from edit_collapse.stats import layer_stats

    return layer_stats(
        model, tok, editor.cfg.rewrite_module_tmp.format(layer), texts,
        n_samples=editor.cfg.mom2_n_samples, cache_dir=editor.stats_cache_dir,
        dtype=editor.cfg.mom2_dtype, model_digest=editor._digest,
    ).to(core.device_of(model))  # fmt: skip


class FTEditor(Editor):
    """Constrained fine-tuning of the rewrite module's weights (EasyEdit FT): FT-M (CE on every
    target token, prompt masked) or FT-L (loss at the last prompt position only)."""

    alg = "FT"
    batchable = True

    @property
    def name(self) -> str:  # type: ignore[override]
        return "ft-m" if self.cfg.objective_optimization == "target_new" else "ft-l"

    def _edit(self, model: Any, tok: Any, batch: list[EditRequest], h: EditHandle) -> None:
        names = [self.cfg.rewrite_module_tmp.format(layer) for layer in self.cfg.layers]
        ws = [core.weight_of(model, n) for n in names]
        for n in names:
            h.remember(n + ".weight")
        orig = [w.detach().clone() for w in ws]
        dev = core.device_of(model)
        rows, spans = [], []
        for r in batch:
            pid, tid = core.encode(tok, r.prompt), core.target_ids(tok, r.target_new)
            if self.cfg.objective_optimization == "prompt_last":
                tid = tid[:1]
            rows.append((pid + tid)[-self.cfg.max_length :])
            spans.append(len(tid))
        ids, att = core.pad_right(rows, core.pad_id(tok), dev)
        labels = torch.full_like(ids, -100)
        for i, (row, m) in enumerate(zip(rows, spans, strict=True)):
            labels[i, len(row) - m : len(row)] = ids[i, len(row) - m : len(row)]
        opt = torch.optim.Adam(ws, lr=self.cfg.lr, weight_decay=self.cfg.weight_decay)
        # the blocks below the first trained module keep their weights: run them once
        first = min(names, key=lambda n: len(core.frozen_modules(model, n, include_hook=False)))
        below = core.frozen_modules(model, first, include_hook=False)
        with (
            core.replay_outputs(model, below, ids, att)
            if below and not model.training
            else nullcontext()
        ):
            self._steps(model, ids, att, labels, ws, orig, opt)
        for n, w, o in zip(names, ws, orig, strict=True):
            core.check_update(w.detach() - o, f"FT at {n}")

    def _steps(self, model: Any, ids: torch.Tensor, att: torch.Tensor, labels: torch.Tensor,
               ws: list[torch.nn.Parameter], orig: list[torch.Tensor], opt: Any) -> None:  # fmt: skip
        for _ in range(self.cfg.num_steps):
            logits = model(input_ids=ids, attention_mask=att, use_cache=False).logits.float()
            loss = torch.nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]),
                labels[:, 1:].reshape(-1),
                ignore_index=-100,
            )
            if float(loss.detach()) < 1e-2:
                break
            grads = torch.autograd.grad(loss, ws)
            for w, g in zip(ws, grads, strict=True):
                w.grad = g
            opt.step()
            opt.zero_grad(set_to_none=True)
            if self.cfg.norm_constraint not in (False, None, 0):
                eps = float(self.cfg.norm_constraint)
                with torch.no_grad():
                    for w, o in zip(ws, orig, strict=True):
                        w.copy_(torch.clamp(w, o - eps, o + eps))


class ROMEEditor(Editor):
    """ROME (Meng et al. 2022, §3.1): rank-one update
    ``W <- W + (v* - W k*)(C^-1 k*)^T / ((C^-1 k*)^T k*)`` at one layer (eq. 2)."""

    alg = "ROME"
    name = "rome"

    def stats_layers(self) -> list[int]:
        return list(self.cfg.layers) if self.cfg.mom2_adjustment else []

    def _edit(self, model: Any, tok: Any, batch: list[EditRequest], h: EditHandle) -> None:
        (req,) = batch
        if len(self.cfg.layers) != 1:
            raise EditInputError(f"ROME edits one layer, got layers={self.cfg.layers}")
        layer = self.cfg.layers[0]
        name = self.cfg.rewrite_module_tmp.format(layer)
        tpl = self.templates(model, tok)
        texts = [t.format(req.prompt) for t in tpl]
        idxs = [
            core.lookup_index(tok, x, req.subject, self.cfg.fact_token, req.case_id) for x in texts
        ]
        k = core.compute_keys(model, tok, name, texts, idxs).mean(0)
        v_star, _ = core.optimize_target(model, tok, self.cfg, [req], name, tpl, report=h.v_star)
        u = torch.linalg.solve(self.stats(model, tok, layer), k) if self.cfg.mom2_adjustment else k
        with torch.no_grad():
            cur = core.module(model, name)(k.to(core.weight_of(model, name).dtype)).float()
        delta = torch.outer(v_star[0] - cur, u) / (u @ k)
        self._add(model, h, layer, delta, "rome")


class MEMITEditor(Editor):
    """MEMIT (Meng et al. 2023, eq. 14-16, Alg. 1): z* at the top edited layer, then per layer
    ``Delta = R K^T (lambda C_0 + K K^T)^-1`` with the residual spread over the remaining layers."""

    alg = "MEMIT"
    name = "memit"
    batchable = True

    def stats_layers(self) -> list[int]:
        return list(self.cfg.layers)

    def _zs(
        self, model: Any, tok: Any, batch: list[EditRequest], report: list[dict[str, Any]]
    ) -> torch.Tensor:
        top = self.cfg.layer_module_tmp.format(self.cfg.layers[-1])
        z, _ = core.optimize_target(
            model, tok, self.cfg, batch, top, self.templates(model, tok), report=report
        )
        return z

    def _keys(self, model: Any, tok: Any, batch: list[EditRequest], layer: int) -> torch.Tensor:
        name = self.cfg.rewrite_module_tmp.format(layer)
        tpl = self.templates(model, tok)
        texts = [t.format(r.prompt) for r in batch for t in tpl]
        subj = [r for r in batch for _ in tpl]
        idxs = [
            core.lookup_index(tok, x, r.subject, self.cfg.fact_token, r.case_id)
            for x, r in zip(texts, subj, strict=True)
        ]
        k = core.compute_keys(model, tok, name, texts, idxs)
        return k.view(len(batch), len(tpl), -1).mean(1)  # [n, d_in]

    def _cur_z(self, model: Any, tok: Any, batch: list[EditRequest]) -> torch.Tensor:
        top = self.cfg.layer_module_tmp.format(self.cfg.layers[-1])
        idxs = [
            core.lookup_index(tok, r.prompt, r.subject, self.cfg.fact_token, r.case_id)
            for r in batch
        ]
        return core.module_outputs(model, tok, top, [r.prompt for r in batch], idxs)

    def _solve(
        self, model: Any, tok: Any, layer: int, K: torch.Tensor, R: torch.Tensor
    ) -> torch.Tensor:
        C = self.cfg.mom2_update_weight * self.stats(model, tok, layer)
        A = (C + K.T @ K).double()
        core.check_update(A, f"{self.name}: lambda*C_0 + K K^T at layer {layer}")
        L, info = torch.linalg.cholesky_ex(A)
        if int(info) != 0:  # C_0 is rank-deficient (too few or too uniform statistics texts)
            warnings.warn(
                f"lambda*C_0 + K K^T at layer {layer} is singular; adding a 1e-6 relative ridge "
                "(use more statistics texts)",
                stacklevel=2,
            )
            A = A + 1e-6 * A.diagonal().mean() * torch.eye(
                A.shape[0], dtype=A.dtype, device=A.device
            )
            L, info = torch.linalg.cholesky_ex(A)
            if int(info) != 0:
                raise EditDivergedError(
                    f"{self.name}: lambda*C_0 + K K^T at layer {layer} is not positive definite; "
                    "raise mom2_update_weight or use more statistics texts"
                )
        adj = torch.cholesky_solve(K.T.double(), L).float()  # [d_in, n]
        return R.T @ adj.T  # [d_out, d_in]

    def _edit(self, model: Any, tok: Any, batch: list[EditRequest], h: EditHandle) -> None:
        zs = self._zs(model, tok, batch, h.v_star)
        for i, layer in enumerate(self.cfg.layers):
            K = self._keys(model, tok, batch, layer)
            R = (zs - self._cur_z(model, tok, batch)) / (len(self.cfg.layers) - i)
            self._add(model, h, layer, self._solve(model, tok, layer, K, R), self.name)
        self._after_batch(model, tok, batch)

    def _after_batch(self, model: Any, tok: Any, batch: list[EditRequest]) -> None:
        pass


class AlphaEditEditor(MEMITEditor):
    """AlphaEdit (Fang et al. 2025, eq. 13): MEMIT's update projected on the null space of the
    preserved keys, ``Delta = R K_1^T P (K_p K_p^T P + K_1 K_1^T P + L2 I)^-1`` with
    ``P = U_hat U_hat^T`` from the eigenvectors of ``K_0 K_0^T`` under ``nullspace_threshold``;
    ``K_p`` accumulates earlier edits of a sequential run. ``reset_cache=True`` clears that
    accumulation whenever a handle restores the weights (independent edits)."""

    alg = "AlphaEdit"
    name = "alphaedit"

    def __init__(self, cfg: EditConfig | None = None, stats_texts: Sequence[str] | None = None,
                 stats_cache_dir: str | Path | None = None, reset_cache: bool = True) -> None:  # fmt: skip
        super().__init__(cfg, stats_texts, stats_cache_dir)
        self.reset_cache = reset_cache
        self.cache_c: dict[int, torch.Tensor] = {}
        self._P: dict[int, torch.Tensor] = {}

    def reset(self) -> None:
        """Forget the keys of earlier edits (``K_p``)."""
        self.cache_c = {}

    def _attach(self, h: EditHandle) -> None:
        if self.reset_cache:
            h.on_restore.append(self.reset)

    def projector(self, model: Any, tok: Any, layer: int) -> torch.Tensor:
        """``P = U_hat U_hat^T`` over the eigenvectors of ``C_0`` with eigenvalue below
        ``nullspace_threshold``; an empty null space is an error (``P = 0`` edits nothing)."""
        if layer not in self._P:
            ev, U = torch.linalg.eigh(self.stats(model, tok, layer).double())
            keep = U[:, ev < self.cfg.nullspace_threshold]
            if keep.shape[1] == 0:
                raise EditInputError(
                    f"nullspace_threshold={self.cfg.nullspace_threshold:g} leaves no null space "
                    f"at layer {layer}: the smallest eigenvalue of C_0 is {float(ev[0]):.3g}, so "
                    "the projector is 0 and no edit can land; raise nullspace_threshold above it "
                    "(check the spectrum of C_0 for this model)"
                )
            self._P[layer] = (keep @ keep.T).float()
        return self._P[layer]

    def _solve(
        self, model: Any, tok: Any, layer: int, K: torch.Tensor, R: torch.Tensor
    ) -> torch.Tensor:
        P = self.projector(model, tok, layer)
        d = P.shape[0]
        cache = self.cache_c.get(layer, torch.zeros(d, d, device=P.device))
        A = P @ (K.T @ K + cache) + self.cfg.L2 * torch.eye(d, device=P.device)
        X = torch.linalg.solve(A.double(), (P @ K.T @ R).double()).float()  # [d_in, d_out]
        return X.T

    def _after_batch(self, model: Any, tok: Any, batch: list[EditRequest]) -> None:
        for layer in self.cfg.layers:
            K = self._keys(model, tok, batch, layer)
            self.cache_c[layer] = self.cache_c.get(layer, 0) + K.T @ K


EDITORS: dict[str, type[Editor]] = {
    "ft": FTEditor, "ft-m": FTEditor, "ft-l": FTEditor, "rome": ROMEEditor,
    "memit": MEMITEditor, "alphaedit": AlphaEditEditor,
}  # fmt: skip
