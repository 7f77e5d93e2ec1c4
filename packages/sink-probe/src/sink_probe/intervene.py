"""Inference-time interventions on any Hugging Face decoder (no retraining).

Everything goes through :func:`llmcore.hooks.intervene` on the modules named by
:func:`llmcore.hooks.block_modules` (the value projection, the block output) plus one forward
pre-hook per attention module that reads the KV-cache length, so sink positions stay absolute
during cached decoding. With every option off nothing is registered (an exact no-op).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any, Literal

import torch

from sink_probe.errors import SinkProbeConfigError, UnsupportedArchitecture
from sink_probe.metrics import check_tau
from sink_probe.patch import cache_offset, sink_positions

MassiveEdit = Literal["set_zero", "set_mean"]


def _layers(model: Any, layers: Sequence[int] | None) -> list[int]:
    from llmcore.hooks import layer_module_names

    try:
        L = len(layer_module_names(model))
    except Exception as exc:
        raise UnsupportedArchitecture(
            f"cannot find the decoder blocks of {type(model).__name__}: {exc}"
        ) from exc
    if layers is None:
        return list(range(L))
    out = []
    for i in layers:
        if not -L <= int(i) < L:
            raise SinkProbeConfigError(f"layer {i} out of range for a {L}-layer model")
        out.append(int(i) % L)
    return sorted(set(out))


def _value_slice(bm: Any, model: Any, out: torch.Tensor) -> torch.Tensor:
    """A view of the value part of ``bm.v_proj``'s output ``[B,T,*]`` (``[B,T,Hkv*dh]``)."""
    if not bm.v_fused:
        return out
    name = type(model).__name__.lower()
    if "gpt2" in name:
        return out[..., 2 * out.shape[-1] // 3 :]
    raise UnsupportedArchitecture(
        f"zero_sink_value on the fused projection of {type(model).__name__} is not supported; "
        "supported: models with a separate v_proj (Llama, Qwen2, Mistral, ...) and GPT-2"
    )


@contextmanager
def intervene(
    model: Any,
    *,
    zero_sink_value: bool = False,
    massive: MassiveEdit | None = None,
    massive_means: Mapping[int, Mapping[tuple[int, int], float]] | None = None,
    suppress_massive: float | None = None,
    drop_sink_attention: bool = False,
    scale_sink_logits: float | None = None,
    layers: Sequence[int] | None = None,
    heads: Sequence[int] | None = None,
    sink_set: Sequence[int] = (0,),
    tau_abs: float | None = 100.0,
    tau_ratio: float = 1000.0,
) -> Iterator[dict[str, Any]]:
    """Inference-time interventions of Sec. 2.4 on ``layers`` (default: all); yields a dict whose
    ``"clipped"``/``"seen"`` count the clamp's bound entries.

    * ``zero_sink_value``: the value vectors of the sink positions set to zero;
    * ``massive="set_zero"``: massive entries (``|x| > tau_abs`` and ``> tau_ratio * median``)
      of each block output set to zero; ``"set_mean"``: the ``(token, channel)`` entries of
      ``massive_means[layer]`` set to their reference mean (:func:`massive_means`), as in Sun
      et al. (2024, Sec. 3);
    * ``suppress_massive=c``: sink-token entries of each block output clamped to
      ``[-c*median|x|, c*median|x|]``;
    * ``drop_sink_attention``: the sink keys masked out of every non-sink query's softmax (on
      ``heads``, default all); ``scale_sink_logits=g``: their unnormalised weight times ``g``.
    """
    from llmcore.hooks import block_modules, get_module
    from llmcore.hooks import intervene as core_intervene

    if massive is not None and massive not in ("set_zero", "set_mean"):
        raise SinkProbeConfigError(f"massive must be 'set_zero' or 'set_mean', got {massive!r}")
    if massive == "set_mean" and not massive_means:
        raise SinkProbeConfigError(
            "massive='set_mean' needs massive_means (see sink_probe.massive_means on reference "
            "texts); use massive='set_zero' to zero the entries instead"
        )
    if massive_means and massive != "set_mean":
        raise SinkProbeConfigError("massive_means is only used with massive='set_mean'")
    if drop_sink_attention and scale_sink_logits is not None:
        raise SinkProbeConfigError(
            "drop_sink_attention and scale_sink_logits both edit the sink logits; choose one"
        )
    if scale_sink_logits is not None and not (
        math.isfinite(scale_sink_logits) and scale_sink_logits > 0
    ):
        raise SinkProbeConfigError(f"scale_sink_logits must be > 0, got {scale_sink_logits!r}")
    if suppress_massive is not None and not (
        math.isfinite(suppress_massive) and suppress_massive > 0
    ):
        raise SinkProbeConfigError(f"suppress_massive must be > 0, got {suppress_massive!r}")
    if massive == "set_zero":
        check_tau(tau_abs, tau_ratio)
    sink = tuple(int(s) for s in sink_set)
    if not sink or any(s < 0 for s in sink):
        raise SinkProbeConfigError(f"sink_set must hold non-negative positions, got {sink_set!r}")
    stats: dict[str, Any] = {"clipped": 0, "seen": 0}
    active = (
        zero_sink_value
        or massive is not None
        or suppress_massive is not None
        or drop_sink_attention
        or scale_sink_logits is not None
    )
    if not active:
        yield stats
        return
    sel = _layers(model, layers)
    edits: dict[str, Any] = {}
    handles = []
    logit_bias = (
        -math.inf
        if drop_sink_attention
        else (math.log(scale_sink_logits) if scale_sink_logits is not None else None)
    )
    for li in sel:
        bm = block_modules(model, li)
        attn = get_module(model, bm.attn)
        ctx = {"offset": 0}

        def pre(mod, args, kwargs, ctx=ctx, li=li):
            ctx["offset"] = cache_offset(li, kwargs)
            if logit_bias is None:
                return None
            return _edit_mask(args, kwargs, sink, ctx["offset"], logit_bias, heads, mod)

        handles.append(attn.register_forward_pre_hook(pre, with_kwargs=True))
        if zero_sink_value:

            def zero_v(out, ctx=ctx, bm=bm):
                m = sink_positions(sink, ctx["offset"], out.shape[1]).to(out.device)
                new = out.clone()
                _value_slice(bm, model, new)[:, m] = 0
                return new

            edits[bm.v_proj] = zero_v
        block_edits = []
        if massive == "set_zero":

            def set_zero(x):
                a = x.abs()
                med = a.flatten(1).median(-1).values.view(-1, 1, 1)
                hit = a > tau_ratio * med
                if tau_abs is not None:
                    hit &= a > tau_abs
                return x.masked_fill(hit, 0.0)

            block_edits.append(set_zero)
        if massive == "set_mean" and li in massive_means:  # type: ignore[operator]
            table = dict(massive_means[li])  # type: ignore[index]

            def set_mean(x, table=table, ctx=ctx):
                new = x.clone()
                for (t, c), v in table.items():
                    if ctx["offset"] <= t < ctx["offset"] + x.shape[1]:
                        new[:, t - ctx["offset"], c] = v
                return new

            block_edits.append(set_mean)
        if suppress_massive is not None:

            def clamp(x, ctx=ctx):
                m = sink_positions(sink, ctx["offset"], x.shape[1]).to(x.device)[None, :, None]
                c = suppress_massive * x.abs().flatten(1).median(-1).values.view(-1, 1, 1)
                stats["clipped"] += int(((x.abs() > c) & m).sum())
                stats["seen"] += int(m.sum()) * x.shape[0] * x.shape[2]
                return torch.where(m, torch.maximum(torch.minimum(x, c), -c), x)

            block_edits.append(clamp)
        if block_edits:

            def chain(x, fns=tuple(block_edits)):
                for f in fns:
                    x = f(x)
                return x

            edits[bm.block] = chain
    try:
        with ExitStack() as stack:
            if edits:
                stack.enter_context(core_intervene(model, edits))
            yield stats
    finally:
        for h in handles:
            h.remove()


def _edit_mask(args, kwargs, sink, offset, bias, heads, mod):
    """Add ``bias`` to the sink columns of every non-sink query row of the attention mask."""
    mask = kwargs.get("attention_mask")
    hs = kwargs.get("hidden_states", args[0] if args else None)
    if hs is None:
        return None
    B, Tq = hs.shape[:2]
    if mask is None:
        Tk = Tq + offset
        rows = torch.arange(Tq).view(-1, 1) + offset
        mask = torch.zeros(B, 1, Tq, Tk, dtype=hs.dtype)
        mask = mask.masked_fill(torch.arange(Tk).view(1, -1) > rows, torch.finfo(hs.dtype).min)
    elif mask.dtype == torch.bool:
        mask = torch.zeros(mask.shape, dtype=hs.dtype).masked_fill(~mask, torch.finfo(hs.dtype).min)
    Tk = mask.shape[-1]
    H = getattr(mod, "num_heads", None) or mod.config.num_attention_heads
    extra = torch.zeros(1, H, Tq, Tk, dtype=mask.dtype)
    qrows = torch.tensor([offset + i not in sink for i in range(Tq)])
    cols = torch.tensor([j in sink for j in range(Tk)])
    hsel = torch.zeros(H, dtype=torch.bool)
    hsel[list(heads) if heads is not None else slice(None)] = True
    val = torch.finfo(mask.dtype).min if bias == -math.inf else bias
    sel = hsel.view(H, 1, 1) & qrows.view(1, Tq, 1) & cols.view(1, 1, Tk)
    extra = extra.masked_fill(sel[None], val)
    return args, {**kwargs, "attention_mask": mask + extra}


def massive_means(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    *,
    layers: Sequence[int] | None = None,
    T: int = 64,
    tau_abs: float | None = 100.0,
    tau_ratio: float = 1000.0,
    min_share: float = 0.5,
) -> dict[int, dict[tuple[int, int], float]]:
    """Reference means for ``massive="set_mean"``: per layer, the ``(token, channel)`` entries
    flagged massive in at least ``min_share`` of the reference sequences, with their mean value
    over all of them (Sun et al. 2024, Sec. 3)."""
    from llmcore.hooks import block_modules, capture_activations
    from sink_probe.metrics import detect_massive
    from sink_probe.probe import encode_texts

    sel = _layers(model, layers)
    ids, _ = encode_texts(tokenizer, texts, T)
    names = {block_modules(model, li).block: li for li in sel}
    with capture_activations(model, list(names)) as acts, torch.no_grad():
        model(input_ids=ids, use_cache=False)
    out: dict[int, dict[tuple[int, int], float]] = {}
    for name, li in names.items():
        x = acts[name][0].float()
        counts: dict[tuple[int, int], int] = {}
        for n in range(x.shape[0]):
            for e in detect_massive(x[n], tau_abs, tau_ratio):
                counts[(e.token, e.channel)] = counts.get((e.token, e.channel), 0) + 1
        keep = [k for k, c in counts.items() if c >= min_share * x.shape[0]]
        out[li] = {k: float(x[:, k[0], k[1]].mean()) for k in keep}
    return out
