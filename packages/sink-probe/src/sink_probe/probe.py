"""Streaming per-layer measurement of sinks, massive activations and token mixing.

:func:`probe` registers hooks on every decoder block and its ``self_attn`` module: the attention
maps of one layer are reduced to per-sequence sums inside the hook and dropped, so memory holds
one layer's maps at a time (O(N*H*T^2), never O(N*L*H*T^2)). Above ``chunk_above`` tokens the
maps are computed and reduced in query chunks of ``query_chunk`` rows by an eager attention kernel
of this package, so a full ``T x T`` map never exists. ``stream=False`` is the naive peer: one
``output_attentions=True`` forward that keeps every layer's maps, measured with the pure functions
of :mod:`sink_probe.metrics` (used to check the streaming path and as the benchmark baseline).
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from sink_probe.errors import (
    AttentionMapsUnavailable,
    SinkProbeConfigError,
    SinkProbeInputError,
    UnsupportedArchitecture,
)
from sink_probe.metrics import (
    check_eps,
    check_finite,
    check_sink_set,
    check_tau,
    detect_massive,
    massive_mask,
    massive_stats,
    mixing_metrics,
    query_set,
    residual_per_sequence,
    sink_importance,
    sink_mass,
)

log = logging.getLogger(__name__)
METRICS = ("sink_rate", "sink_mass", "massive", "mixing")
CHUNKED = "sink_probe_chunked"
MAX_ENTRIES = 100


@dataclass
class ProbeReport:
    """What :func:`probe` measured (the JSON report format)."""

    model: str
    T: int
    eps: float
    sink_set: list[int]
    layers: list[int]
    n_sequences: int
    n_skipped: int
    sink_rate_by_pos: list[float] = field(default_factory=list)
    """``SinkRate_eps(j)`` for every position j, over sequences, probed layers and heads."""
    sink_rate_per_layer_head: list[list[float]] = field(default_factory=list)
    """``[L][H]`` sink rate of the first sink position (percent of sequences)."""
    sink_rate_per_layer: list[float] = field(default_factory=list)
    sink_mass: list[list[float]] = field(default_factory=list)
    """``[L][H]`` mean attention mass on the sink set."""
    auto_sinks: list[int] = field(default_factory=list)
    """Positions whose mean importance exceeds ``tau_sink`` in >= 25 % of the heads."""
    massive: list[dict[str, Any]] = field(default_factory=list)
    """Largest massive entries ``{seq, layer, token, channel, value, ratio}`` (at most 100)."""
    massive_layers: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Per layer: mean ``top1_median`` and ``sink_ratio``, top-3 entries, massive channels,
    Jaccard of massive tokens with the sink set."""
    mixing: dict[int, dict[str, float]] = field(default_factory=dict)
    tau_abs: float | None = None
    tau_ratio: float = 1000.0
    n_massive: int = 0
    """Number of massive entries over all sequences and layers."""
    clip_fraction: float | None = None
    """Share of sink entries a ``suppress_massive`` clamp bound during the probe (if any)."""
    ppl: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["massive_layers"] = {str(k): v for k, v in self.massive_layers.items()}
        d["mixing"] = {str(k): v for k, v in self.mixing.items()}
        return d

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def save(self, path: str | Path) -> Path:
        from llmcore.data import atomic_write_text

        atomic_write_text(Path(path), self.to_json())
        return Path(path)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProbeReport:
        d = dict(d)
        d["massive_layers"] = {int(k): v for k, v in d.get("massive_layers", {}).items()}
        d["mixing"] = {int(k): v for k, v in d.get("mixing", {}).items()}
        return cls(**d)

    def layer_rows(self) -> list[dict[str, Any]]:
        rows = []
        for i, li in enumerate(self.layers):
            row: dict[str, Any] = {"layer": li}
            if self.sink_rate_per_layer:
                row["sink_rate"] = self.sink_rate_per_layer[i]
            if self.sink_mass:
                row["sink_mass"] = sum(self.sink_mass[i]) / len(self.sink_mass[i])
            if li in self.massive_layers:
                row["top1/median"] = self.massive_layers[li]["top1_median"]
                row["sink/median"] = self.massive_layers[li]["sink_ratio"]
            row.update(self.mixing.get(li, {}))
            rows.append(row)
        return rows

    def table(self) -> str:
        """A Markdown table, one row per layer."""
        rows = self.layer_rows()
        cols = list(dict.fromkeys(k for r in rows for k in r))
        out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for r in rows:
            out.append("| " + " | ".join(_fmt(r.get(c)) for c in cols) + " |")
        return "\n".join(out)


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"
    return str(v)


# --------------------------------------------------------------------------- inputs


def encode_texts(
    tokenizer: Any, texts: Sequence[str], T: int, *, add_bos: bool | None = None
) -> tuple[torch.Tensor, int]:
    """Token ids ``[N, T]`` of the texts with at least ``T`` tokens (longer ones truncated) and
    the number skipped. ``add_bos=None`` puts the tokenizer's BOS first unless it is there."""
    if not isinstance(T, int) or T < 2:
        raise SinkProbeConfigError(f"T must be an integer >= 2 (tokens per sample), got {T!r}")
    bos = tokenizer.bos_token_id
    if add_bos is True and bos is None:
        raise SinkProbeConfigError("add_bos=True but the tokenizer has no BOS token")
    rows, skipped = [], 0
    for t in texts:
        ids = list(tokenizer(t, add_special_tokens=True)["input_ids"])
        if add_bos is not False and bos is not None and (not ids or ids[0] != bos):
            ids = [bos, *ids]
        if len(ids) < T:
            skipped += 1
            continue
        rows.append(ids[:T])
    if not rows:
        raise SinkProbeInputError(
            f"all {len(texts)} texts are shorter than T={T} tokens; pass longer texts or a "
            "smaller T"
        )
    if skipped:
        log.warning("skipped %d of %d texts shorter than T=%d tokens", skipped, len(texts), T)
    return torch.tensor(rows, dtype=torch.long), skipped


def has_fixed_sink(tokenizer: Any) -> bool:
    """Whether every sequence starts with the same token (a BOS), so position 0 is one token."""
    return tokenizer.bos_token_id is not None


def check_bos(tokenizer: Any, *, require_bos: bool = False) -> None:
    """Warn (or raise with ``require_bos``) when the sink set would move with the text."""
    if has_fixed_sink(tokenizer):
        return
    msg = (
        "the tokenizer adds no BOS token, so position 0 is a different content token in every "
        "text: sink-position interventions act on a moving sink set"
    )
    if require_bos:
        raise SinkProbeInputError(msg + "; use a tokenizer with a BOS token or drop --require-bos")
    log.warning(msg)


def decoder_layers(model: Any) -> list[Any]:
    """The decoder blocks of a Llama/Qwen2/Mistral-style model (``model.model.layers`` with a
    ``self_attn`` module each)."""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None or not all(hasattr(m, "self_attn") for m in layers):
        raise UnsupportedArchitecture(
            f"{type(model).__name__} has no model.layers[i].self_attn modules; probe supports "
            "Llama-style decoders (LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM, "
            "Qwen3ForCausalLM, ...); for other models measure maps from TransformerLens or "
            "nnsight with the functions of sink_probe.metrics"
        )
    return list(layers)


def _attn_impl(model: Any) -> str:
    return str(getattr(model.config, "_attn_implementation", None) or "eager")


# --------------------------------------------------------------------------- reduction


@lru_cache(maxsize=8)
def _index_sets(T: int, sink: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
    """Mixing queries, sink indices and the boolean masks ``is_sink``/``is_query`` over ``T``
    positions (read-only; shared by every layer and batch of a probe)."""
    q = torch.tensor(query_set(T, sink))
    sink_idx = torch.tensor(sink)
    is_sink = torch.zeros(T, dtype=torch.bool)
    is_sink[sink_idx] = True
    is_query = torch.zeros(T, dtype=torch.bool)
    is_query[q] = True
    return q, sink_idx, is_sink, is_query


class _LayerAcc:
    """Per-sequence sums of one layer's attention statistics, fed row-chunk by row-chunk.

    Index sets are built once per ``(T, sink set)``; a sink set that is a prefix ``0..k-1`` of
    the sequence (the usual case) is handled with slices, and the per-head sums of one chunk
    are stacked into a single accumulator update."""

    def __init__(self, N: int, H: int, T: int, sink: tuple[int, ...], layer: int | None = None):
        self.T, self.sink, self.layer = T, list(sink), layer
        self.q, self.sink_idx, self.is_sink, self.is_query = _index_sets(T, tuple(sink))
        self.prefix = self.sink == list(range(len(self.sink)))
        self.col = torch.zeros(N, H, T, dtype=torch.float64)
        # rows: sink mass of non-sink rows, m_S, M_self, M_nn, C_sn (per-query sums)
        self.sums = torch.zeros(5, N, H, dtype=torch.float64)
        self.mass, self.mS, self.self_, self.nn, self.csn = self.sums.unbind(0)
        self.has_csn = False
        self.filled = False
        self.attn_out: torch.Tensor | None = None

    def add(self, a: torch.Tensor, rows: torch.Tensor, v: torch.Tensor | None, wo) -> None:
        """``a [N,H,R,T]`` rows ``rows`` (consecutive, causal) of the maps; ``v [N,H,T,dh]``;
        ``wo [d,H*dh]``. Raises on non-finite maps, naming the layer and head."""
        self.filled = True
        a = a.detach().float()
        colsum = a.sum(-2)
        # a non-finite entry makes its column sum non-finite: one small check per chunk
        if not bool(torch.isfinite(colsum).all()):
            check_finite(a, "attention", self.layer)
        self.col += colsum
        r0 = int(rows[0])
        diag_all = a.diagonal(offset=r0, dim1=-2, dim2=-1)  # A_ii of the chunk's rows
        k = len(self.sink)
        if self.prefix:  # non-sink rows = mixing queries = rows >= k: slices only
            lo = max(k - r0, 0)
            if lo >= a.shape[-2]:
                return
            aq, diag = a[:, :, lo:], diag_all[:, :, lo:]
            a_sink = aq[..., :k].sum(-1)  # [N,H,Q]
            mass = a_sink.sum(-1)
        else:
            a_sink_all = a.index_select(-1, self.sink_idx).sum(-1)  # [N,H,R]
            mass = a_sink_all[:, :, ~self.is_sink[rows]].sum(-1)
            sel = self.is_query[rows]
            if not bool(sel.any()):
                self.mass += mass
                return
            aq, diag, a_sink = a[:, :, sel], diag_all[:, :, sel], a_sink_all[:, :, sel]
        mS, d_self = a_sink.sum(-1), diag.sum(-1)
        parts = [mass, mS, d_self, aq.sum((-1, -2)) - mS - d_self]
        if v is not None and wo is not None:
            self.has_csn = True
            v = v.detach().float()
            H, dh = v.shape[1], v.shape[-1]
            w = wo.detach().float().view(wo.shape[0], H, dh).permute(1, 2, 0)  # [H,dh,d]
            fo = torch.linalg.vector_norm(torch.matmul(aq, v) @ w, dim=-1)  # [N,H,Q]
            if self.prefix:
                so = torch.linalg.vector_norm(aq[..., :k] @ (v[:, :, :k] @ w), dim=-1)
            else:
                vs = v.index_select(2, self.sink_idx) @ w  # [N,H,|S|,d]
                so = torch.linalg.vector_norm(aq.index_select(-1, self.sink_idx) @ vs, dim=-1)
            parts.append((so / fo.clamp_min(1e-30)).sum(-1))
        self.sums[: len(parts)] += torch.stack(parts)


def _chunked_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kw):
    """Eager attention in query chunks; each chunk's maps are reduced into the probe's
    accumulator on ``module`` and dropped (used only inside :func:`probe`)."""
    from transformers.models.llama.modeling_llama import repeat_kv

    acc: _LayerAcc | None = getattr(module, "_sink_probe_acc", None)
    chunk = getattr(module, "_sink_probe_chunk", 512)
    k = repeat_kv(key, module.num_key_value_groups)
    v = repeat_kv(value, module.num_key_value_groups)
    Tq, Tk = query.shape[-2], k.shape[-2]
    outs = []
    for s in range(0, Tq, chunk):
        q = query[:, :, s : s + chunk]
        sc = torch.matmul(q, k.transpose(2, 3)) * scaling
        if attention_mask is not None:
            sc = sc + attention_mask[:, :, s : s + chunk, :Tk]
        else:
            rows = torch.arange(s, s + q.shape[-2]).view(-1, 1) + (Tk - Tq)
            sc = sc.masked_fill(torch.arange(Tk).view(1, -1) > rows, float("-inf"))
        p = torch.softmax(sc, dim=-1, dtype=torch.float32).to(q.dtype)
        if acc is not None:
            acc.add(p, torch.arange(s, s + q.shape[-2]), v, module.o_proj.weight)
        outs.append(torch.matmul(p, v))
    return torch.cat(outs, 2).transpose(1, 2).contiguous(), None


def _register_chunked() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

    AttentionInterface.register(CHUNKED, _chunked_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(CHUNKED, eager_mask)


@contextmanager
def _attn_implementation(model: Any, name: str):
    old = model.config._attn_implementation
    model.config._attn_implementation = name
    try:
        yield
    finally:
        model.config._attn_implementation = old


# --------------------------------------------------------------------------- probe


def probe(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    T: int = 64,
    layers: str | Sequence[int] = "all",
    sink_set: Sequence[int] = (0,),
    metrics: Sequence[str] = METRICS,
    batch_size: int = 8,
    stream: bool = True,
    *,
    eps: float = 0.3,
    tau_abs: float | None = 100.0,
    tau_ratio: float = 1000.0,
    tau_sink: float = 0.3,
    add_bos: bool | None = None,
    query_chunk: int = 512,
    chunk_above: int = 1024,
    name: str | None = None,
) -> ProbeReport:
    """Measure sink rate and mass (Gu et al. 2025), massive activations (Sun et al. 2024) and
    the token-mixing metrics on ``texts`` (first ``T`` tokens of each; shorter ones skipped).

    Needs a model that returns attention maps (``attn_implementation="eager"``); above
    ``chunk_above`` tokens the maps are computed by this package's chunked eager kernel, which
    works whatever kernel the model was loaded with."""
    eps = check_eps(eps)
    check_tau(tau_abs, tau_ratio)
    bad = sorted(set(metrics) - set(METRICS))
    if bad or not metrics:
        raise SinkProbeConfigError(f"unknown metrics {bad or metrics}; choose from {METRICS}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise SinkProbeConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
    if query_chunk < 1:
        raise SinkProbeConfigError(f"query_chunk must be >= 1, got {query_chunk}")
    blocks = decoder_layers(model)
    L = len(blocks)
    sel = list(range(L)) if layers == "all" else [int(i) for i in layers]  # type: ignore[union-attr]
    if not sel or any(not -L <= i < L for i in sel):
        raise SinkProbeConfigError(f"layers {layers!r} out of range for a {L}-layer model")
    sel = sorted({i % L for i in sel})
    ids, skipped = encode_texts(tokenizer, texts, T, add_bos=add_bos)
    sink = check_sink_set(sink_set, T)
    chunked = chunk_above < T
    if not chunked and _attn_impl(model) != "eager":
        raise AttentionMapsUnavailable(
            f"the model runs attn_implementation={_attn_impl(model)!r}, which returns no "
            "attention maps; reload it with llmcore.load_causal_lm(name, "
            "attn_implementation='eager') (or from_pretrained(..., attn_implementation='eager'))"
        )
    if stream:
        raw = _probe_stream(
            model, blocks, ids, sel, sink, batch_size, chunked, query_chunk, tau_abs, tau_ratio
        )
    else:
        raw = _probe_naive(model, blocks, ids, sel, sink, batch_size, tau_abs, tau_ratio)
    return _report(
        raw,
        model,
        name,
        T,
        eps,
        sink,
        sel,
        len(ids),
        skipped,
        metrics,
        tau_abs,
        tau_ratio,
        tau_sink,
    )


def _block_io_hooks(block, li, store):
    def pre(mod, args, kwargs):
        store.setdefault(li, {})["x_in"] = (
            kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
        ).detach()

    def post(mod, args, out):
        store.setdefault(li, {})["x_out"] = (out[0] if isinstance(out, tuple) else out).detach()

    return [
        block.register_forward_pre_hook(pre, with_kwargs=True),
        block.register_forward_hook(post),
    ]


def _probe_stream(
    model, blocks, ids, sel, sink, batch_size, chunked, query_chunk, tau_abs, tau_ratio
):
    from sink_probe.patch import clip_stats, reset_clip_stats

    reset_clip_stats(model)
    raw = _Raw(sel, tau_abs, tau_ratio)
    for b0 in range(0, len(ids), batch_size):
        x = ids[b0 : b0 + batch_size]
        N, T = x.shape
        accs: dict[int, _LayerAcc] = {}
        io: dict[int, dict[str, Any]] = {}
        handles = []
        for li in sel:
            attn = blocks[li].self_attn
            H = model.config.num_attention_heads
            acc = accs[li] = _LayerAcc(N, H, T, sink, li)
            attn._sink_probe_acc, attn._sink_probe_chunk = acc, query_chunk
            vals: dict[str, torch.Tensor] = {}  # this layer's values, read by a_hook
            handles += _block_io_hooks(blocks[li], li, io)

            def v_hook(mod, args, out, vals=vals, attn=attn):
                n, t, _ = out.shape
                v = out.detach().view(n, t, -1, attn.head_dim).transpose(1, 2)
                g = attn.num_key_value_groups
                vals["v"] = v.repeat_interleave(g, 1) if g > 1 else v

            def a_hook(mod, args, out, acc=acc, vals=vals, li=li):
                w = out[1]
                if w is not None:
                    rows = torch.arange(w.shape[-2])
                    acc.add(w, rows, vals.get("v"), mod.o_proj.weight)
                elif not acc.filled:
                    raise AttentionMapsUnavailable(
                        f"layer {li} returned no attention maps (attn_implementation="
                        f"{_attn_impl(model)!r}); reload the model with "
                        "attn_implementation='eager'"
                    )
                acc.attn_out = out[0].detach()
                vals.clear()
                return (out[0], None, *out[2:])

            handles.append(attn.v_proj.register_forward_hook(v_hook))
            handles.append(attn.register_forward_hook(a_hook))
        try:
            if chunked:
                _register_chunked()
                with _attn_implementation(model, CHUNKED), torch.no_grad():
                    model(input_ids=x, use_cache=False)
            else:
                with torch.no_grad():
                    model(input_ids=x, use_cache=False)
        finally:
            for h in handles:
                h.remove()
            for li in sel:
                a = blocks[li].self_attn
                for k in ("_sink_probe_acc", "_sink_probe_chunk"):
                    if hasattr(a, k):
                        delattr(a, k)
        for li in sel:
            raw.add_attention(li, accs[li])
        for grp in _layer_groups(sel, io[sel[0]]["x_out"].numel()):
            aos = [accs[li].attn_out for li in grp]
            raw.add_residuals(
                grp,
                torch.stack([io[li]["x_in"] for li in grp]),
                torch.stack([io[li]["x_out"] for li in grp]),
                None if any(t is None for t in aos) else torch.stack(aos),  # type: ignore[misc]
                sink,
                b0,
            )
    raw.clip = clip_stats(model)
    return raw


def _layer_groups(sel: list[int], numel: int, budget: int = 1 << 22) -> list[list[int]]:
    """``sel`` in consecutive groups whose stacked hidden states (``numel`` entries per layer)
    stay within ``budget`` entries, so batching the residual statistics never copies more than
    a few MB at once."""
    k = max(1, budget // max(1, numel))
    return [sel[i : i + k] for i in range(0, len(sel), k)]


def _probe_naive(model, blocks, ids, sel, sink, batch_size, tau_abs, tau_ratio):
    """All layers' maps at once via ``output_attentions=True`` (the memory-hungry peer)."""
    from sink_probe.patch import clip_stats, reset_clip_stats

    reset_clip_stats(model)
    raw = _Raw(sel, tau_abs, tau_ratio)
    for b0 in range(0, len(ids), batch_size):
        x = ids[b0 : b0 + batch_size]
        io: dict[int, dict[str, Any]] = {}
        vals: dict[int, torch.Tensor] = {}
        handles = []
        for li, blk in enumerate(blocks):
            handles += _block_io_hooks(blk, li, io)

            def v_hook(mod, args, out, li=li, attn=blk.self_attn, vals=vals):
                n, t, _ = out.shape
                v = out.detach().view(n, t, -1, attn.head_dim).transpose(1, 2)
                vals[li] = v.repeat_interleave(attn.num_key_value_groups, 1)

            handles.append(blk.self_attn.v_proj.register_forward_hook(v_hook))
        try:
            with torch.no_grad():
                out = model(input_ids=x, output_attentions=True, use_cache=False)
        finally:
            for h in handles:
                h.remove()
        if out.attentions is None or any(a is None for a in out.attentions):
            raise AttentionMapsUnavailable(
                f"output_attentions=True returned no maps (attn_implementation="
                f"{_attn_impl(model)!r}); reload the model with attn_implementation='eager'"
            )
        A = torch.stack([out.attentions[li] for li in sel], 1).float()  # [N,L,H,T,T]
        V = torch.stack([vals[li] for li in sel], 1)
        W = torch.stack([blocks[li].self_attn.o_proj.weight.detach() for li in sel])
        # hidden [N,L,2,T,d]: each probed block's input and output
        hid = torch.stack([torch.stack([io[li]["x_in"], io[li]["x_out"]], 1) for li in sel], 1)
        raw.naive.append((A, V, W, hid))
        for li in sel:
            raw.add_residual(li, io[li]["x_in"], io[li]["x_out"], None, sink, b0)
    raw.clip = clip_stats(model)
    return raw


class _Raw:
    """Sums over sequences of everything a report needs."""

    def __init__(self, sel: list[int], tau_abs: float | None, tau_ratio: float) -> None:
        self.sel, self.tau_abs, self.tau_ratio = sel, tau_abs, tau_ratio
        self.col: dict[int, torch.Tensor] = {}
        self.count: dict[int, torch.Tensor] = {}
        self.sums: dict[int, dict[str, torch.Tensor]] = {}
        self.res: dict[int, dict[str, float]] = {}
        self.mass: dict[int, dict[str, Any]] = {}
        self.entries: list[dict[str, Any]] = []
        self.naive: list[tuple] = []
        self.clip: dict[str, Any] = {}
        self.n = 0

    def add_attention(self, li: int, acc: _LayerAcc) -> None:
        T = acc.T
        alpha = acc.col / torch.arange(T, 0, -1, dtype=torch.float64)
        self._add(self.col, li, alpha.sum(0))
        self._store_alpha(li, alpha)
        nq = len(acc.q)
        d = self.sums.setdefault(li, {})
        for k, t in (("m_S", acc.mS), ("M_nn", acc.nn), ("M_self", acc.self_)):
            d[k] = d.get(k, 0) + (t / nq).sum(0)
        if acc.has_csn:
            d["C_sn"] = d.get("C_sn", 0) + (acc.csn / nq).sum(0)
        d["mass"] = d.get("mass", 0) + (acc.mass / (T - len(acc.sink))).sum(0)

    def _store_alpha(self, li: int, alpha: torch.Tensor) -> None:
        self.count.setdefault(li, [])  # type: ignore[arg-type]
        self.count[li].append(alpha)  # type: ignore[union-attr]

    @staticmethod
    def _add(d, k, v):
        d[k] = d[k] + v if k in d else v

    def add_residual(self, li, x_in, x_out, attn_out, sink, seq0) -> None:
        """One layer's block input and output ``[N,T,d]`` (and attention output or None)."""
        ao = None if attn_out is None else attn_out[None]
        self.add_residuals([li], x_in[None], x_out[None], ao, sink, seq0)

    def add_residuals(self, lis, x_in, x_out, attn_out, sink, seq0) -> None:
        """Residual statistics and massive entries of the layers ``lis`` at once: ``x_in``,
        ``x_out`` (and ``attn_out`` or None) ``[len(lis),N,T,d]``. Stacking the layers turns
        many tiny per-layer operations into a few batched ones."""
        nl, N = x_out.shape[:2]
        flat = x_out.detach().flatten(0, 1).float()  # [nl*N, T, d]
        if not bool(torch.isfinite(flat).all()):
            for j, li in enumerate(lis):
                check_finite(x_out[j], "hidden states", li)
        if attn_out is not None:
            rs = residual_per_sequence(flat, sink, x_in.flatten(0, 1), attn_out.flatten(0, 1))
        else:
            rs = residual_per_sequence(flat, sink)
        per = {k: v.view(nl, N).sum(1).tolist() for k, v in rs.items()}
        st = massive_stats(flat, sink)
        ratio = st["ratio"].view(nl, N).tolist()
        sratio = st["sink_ratio"].view(nl, N).tolist()
        meds = st["median"].tolist()
        # Sun et al.'s detection with one median per sequence and layer; the three largest
        # entries of each for the report
        a = flat.abs()
        dm = a.shape[-1]
        vals, idx = a.flatten(1).topk(3, dim=-1)
        signed = flat.flatten(1).gather(1, idx).tolist()
        hit = massive_mask(a, st["median"].view(-1, 1, 1), self.tau_abs, self.tau_ratio)
        nz = hit.nonzero()
        hv = flat[nz[:, 0], nz[:, 1], nz[:, 2]].tolist() if len(nz) else []
        hits_by_row: dict[int, list] = {}
        for (row, t, c), v in zip(nz.tolist(), hv, strict=True):
            hits_by_row.setdefault(row, []).append((t, c, v))
        for j, li in enumerate(lis):
            d = self.res.setdefault(li, {})
            for k, v in per.items():
                d[k] = d.get(k, 0.0) + v[j]
            m = self.mass.setdefault(li, {"ratio": [], "sink_ratio": [], "top": [], "hits": []})
            m["ratio"] += ratio[j]
            m["sink_ratio"] += sratio[j]
            for n in range(N):
                row = j * N + n
                med = meds[row]
                for v, i, xv in zip(
                    vals[row].tolist(), idx[row].tolist(), signed[row], strict=True
                ):
                    t, c = divmod(i, dm)
                    m["top"].append((v, seq0 + n, t, c, xv, v / med))
                for t, c, v in hits_by_row.get(row, ()):
                    r = abs(v) / med if med > 0 else math.inf
                    m["hits"].append((abs(v), seq0 + n, t, c, v, r))


def _report(raw, model, name, T, eps, sink, sel, n, skipped, metrics, tau_abs, tau_ratio, tau_sink):
    rep = ProbeReport(
        model=name or str(getattr(model.config, "_name_or_path", "") or type(model).__name__),
        T=T,
        eps=eps,
        sink_set=list(sink),
        layers=sel,
        n_sequences=n,
        n_skipped=skipped,
        tau_abs=tau_abs,
        tau_ratio=tau_ratio,
    )
    if raw.naive:
        alpha = {li: [] for li in sel}
        mix: dict[int, dict[str, float]] = {li: {} for li in sel}
        mass_sum = {li: 0 for li in sel}
        for A, V, W, hid in raw.naive:
            al = sink_importance(A)  # [N,L,H,T]
            sm = sink_mass(A, sink) * A.shape[0]
            for j, li in enumerate(sel):
                mm = mixing_metrics(A[:, j : j + 1], V[:, j : j + 1], W[j : j + 1], hid[:, j], sink)
                alpha[li].append(al[:, j].double())
                mass_sum[li] = mass_sum[li] + sm[j]
                for k, v in mm[0].items():
                    mix[li][k] = mix[li].get(k, 0.0) + v * A.shape[0]
        alphas = {li: torch.cat(alpha[li]) for li in sel}
        mixing = {li: {k: v / n for k, v in mix[li].items()} for li in sel}
        masses = {li: (mass_sum[li] / n).tolist() for li in sel}
    else:
        alphas = {li: torch.cat(raw.count[li]) for li in sel}
        mixing = {}
        for li in sel:
            row = {k: float(v.mean()) / n for k, v in raw.sums[li].items() if k != "mass"}
            row.update({k: v / n for k, v in raw.res[li].items()})
            mixing[li] = row
        masses = {li: (raw.sums[li]["mass"] / n).tolist() for li in sel}
    if "sink_rate" in metrics:
        allal = torch.stack([alphas[li] for li in sel], 1)  # [N,L,H,T]
        hit = (allal > eps).double()
        rep.sink_rate_by_pos = (100 * hit.flatten(0, 2).mean(0)).tolist()
        j0 = sink[0]
        rep.sink_rate_per_layer_head = (100 * hit[..., j0].mean(0)).tolist()
        rep.sink_rate_per_layer = (100 * hit[..., j0].mean((0, 2))).tolist()
        mean_alpha = allal.mean(0)  # [L,H,T]
        rep.auto_sinks = detect_sinks(mean_alpha, tau_sink)
    if "sink_mass" in metrics:
        rep.sink_mass = [masses[li] for li in sel]
    if "mixing" in metrics:
        rep.mixing = mixing
    if "massive" in metrics:
        _massive_into(rep, raw, sel, sink, tau_abs, tau_ratio)
    if raw.clip.get("seen"):
        rep.clip_fraction = raw.clip["clip_fraction"]
    return rep


def detect_sinks(mean_alpha: torch.Tensor, tau_sink: float = 0.3, min_head_frac: float = 0.25):
    """Auto-detected sinks (Sec. 2.1 option): positions j whose sample-mean importance
    ``alpha_j`` exceeds ``tau_sink`` in at least ``min_head_frac`` of the ``(l, h)`` heads.
    ``mean_alpha``: ``[L,H,T]``."""
    if not 0 < tau_sink < 1:
        raise SinkProbeConfigError(f"tau_sink must be in (0, 1), got {tau_sink!r}")
    frac = (mean_alpha > tau_sink).double().flatten(0, 1).mean(0)
    return [int(j) for j in torch.nonzero(frac >= min_head_frac).flatten()]


def _massive_into(rep, raw, sel, sink, tau_abs, tau_ratio) -> None:
    entries = []
    for li in sel:
        m = raw.mass[li]
        top = sorted(m["top"], key=lambda r: -r[0])
        hits = m["hits"]
        chans = Counter(r[3] for r in hits)
        toks_by_seq: dict[int, set[int]] = {}
        for r in hits:
            toks_by_seq.setdefault(r[1], set()).add(r[2])
        jac = [len(t & set(sink)) / len(t | set(sink)) for t in toks_by_seq.values()]
        rep.massive_layers[li] = {
            "top1_median": sum(m["ratio"]) / len(m["ratio"]),
            "sink_ratio": sum(m["sink_ratio"]) / len(m["sink_ratio"]),
            "top3": [{"seq": r[1], "token": r[2], "channel": r[3], "value": r[4]} for r in top[:3]],
            "massive_channels": sorted(chans),
            "sink_jaccard": (sum(jac) / len(jac)) if jac else None,
        }
        entries += [
            {"seq": r[1], "layer": li, "token": r[2], "channel": r[3], "value": r[4], "ratio": r[5]}
            for r in hits
        ]
    entries.sort(key=lambda e: -abs(e["value"]))
    rep.n_massive = len(entries)
    rep.massive = entries[:MAX_ENTRIES]


__all__ = ["ProbeReport", "check_bos", "detect_massive", "detect_sinks", "encode_texts", "probe"]
