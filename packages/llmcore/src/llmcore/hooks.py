"""Forward hooks on named modules: capture activations, edit outputs, ablate.

Every context manager here registers its hooks with ``torch.nn.Module.register_forward_hook``
(or ``register_forward_pre_hook``) and removes all of them on exit, also when the body raises,
so a model is never left with stray hooks. Module names are those of ``model.named_modules()``,
e.g. ``"model.layers.0.mlp"`` for Llama/Qwen2.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor, nn

from llmcore.errors import ConfigError, LLMCoreError

__all__ = [
    "BlockModules",
    "Edit",
    "ablate",
    "block_modules",
    "capture_activations",
    "get_module",
    "intervene",
    "layer_module_names",
]

#: An output edit: takes the module's (first) output tensor, returns its replacement, or
#: ``None`` to keep it (e.g. after editing it in place).
Edit = Callable[[Tensor], Tensor | None]

# Where common Hugging Face causal LMs keep their decoder layers (an nn.ModuleList).
_LAYER_PATHS = (
    "model.layers",  # Llama, Qwen2/3, Mistral, Gemma, Phi-3, OLMo
    "model.language_model.layers",  # multimodal wrappers (Gemma 3, Qwen2-VL, Llava) in v5
    "model.decoder.layers",  # OPT
    "transformer.h",  # GPT-2, GPT-J, Bloom, Falcon
    "gpt_neox.layers",  # Pythia / GPT-NeoX
    "transformer.blocks",  # MPT
    "layers",  # bare decoder models (LlamaModel)
    "h",  # bare GPT2Model
)


def get_module(model: nn.Module, name: str) -> nn.Module:
    """The submodule of ``model`` called ``name`` (``""`` is the model itself).

    Raises :class:`ConfigError` for an unknown name, listing close matches.
    """
    if not isinstance(name, str):
        raise ConfigError(f"module name must be a str, got {type(name).__name__}")
    try:
        return model.get_submodule(name)
    except AttributeError:
        pass
    names = [n for n, _ in model.named_modules() if n]
    close = difflib.get_close_matches(name, names, n=5, cutoff=0.6)
    if close:
        hint = "close matches: " + ", ".join(map(repr, close))
    else:
        top = [n for n, _ in model.named_children()]
        hint = "its top-level modules are: " + (", ".join(map(repr, top)) or "(none)")
    raise ConfigError(f"{type(model).__name__} has no module named {name!r}; {hint}")


def layer_module_names(model: nn.Module) -> list[str]:
    """Names of the decoder layers of a Hugging Face causal LM, in order.

    Tries the known locations (``model.layers`` for Llama/Qwen2, ``transformer.h`` for GPT-2,
    ...) and otherwise falls back to the longest ``nn.ModuleList`` of same-class modules.
    """
    for path in _LAYER_PATHS:
        try:
            layers = model.get_submodule(path)
        except AttributeError:
            continue
        if isinstance(layers, nn.ModuleList) and len(layers) > 0:
            return [f"{path}.{i}" for i in range(len(layers))]
    best: tuple[str, nn.ModuleList] | None = None
    for name, module in model.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) > 0:
            if len({type(m) for m in module}) != 1:
                continue
            if best is None or len(module) > len(best[1]):
                best = (name, module)
    if best is None:
        raise ConfigError(f"cannot find the decoder layers of {type(model).__name__}")
    prefix = f"{best[0]}." if best[0] else ""
    return [f"{prefix}{i}" for i in range(len(best[1]))]


def _resolve(model: nn.Module, names: str | Iterable[str]) -> dict[str, nn.Module]:
    # Resolve every name before registering anything, so a typo leaves the model untouched.
    if isinstance(names, str):
        names = [names]
    return {name: get_module(model, name) for name in dict.fromkeys(names)}


def _first_tensor(value: Any, name: str, what: str) -> Tensor:
    """``value`` itself, or the first element of a tuple/list/``ModelOutput``, as a tensor."""
    if isinstance(value, Tensor):
        return value
    first: Any = None
    if isinstance(value, tuple | list) and value:
        first = value[0]
    elif isinstance(value, Mapping) and value:
        first = next(iter(value.values()))
    if isinstance(first, Tensor):
        return first
    raise LLMCoreError(
        f"module {name!r}: its {what} is a {type(value).__name__}, not a tensor or a "
        "tuple/ModelOutput whose first element is one"
    )


def _input_key(args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> int | str:
    """Where a module call's main input is: ``0`` (first positional) or a keyword name."""
    if args:
        return 0
    for key in ("hidden_states", "input", "x", "inputs_embeds", "input_ids"):
        if isinstance(kwargs.get(key), Tensor):
            return key
    for key, value in kwargs.items():
        if isinstance(value, Tensor):
            return key
    raise LLMCoreError(f"module {name!r} was called without a tensor input")


def _input_tensor(args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> Tensor:
    key = _input_key(args, kwargs, name)
    if key == 0:
        return _first_tensor(args[0], name, "first input")
    return kwargs[key]


@contextmanager
def capture_activations(
    model: nn.Module,
    names: str | Iterable[str],
    *,
    detach: bool = True,
    to_cpu: bool = False,
    input: bool = False,
) -> Iterator[dict[str, list[Tensor]]]:
    """Record the outputs (or, with ``input=True``, the inputs) of the named modules.

    Yields ``{name: [tensor per forward call]}``, filled as the model runs. For a tuple or
    ``ModelOutput`` output (e.g. attention modules) the first element is kept; for inputs, the
    first positional argument (or the ``hidden_states`` keyword). Tensors are detached (unless
    ``detach=False``) but not copied unless ``to_cpu=True`` moves them, so an in-place edit
    made later in the forward (e.g. by an :func:`intervene` hook that returns ``None``) shows
    in the record.
    """
    modules = _resolve(model, names)
    records: dict[str, list[Tensor]] = {name: [] for name in modules}

    def keep(name: str, t: Tensor) -> None:
        if detach:
            t = t.detach()
        if to_cpu:
            t = t.to("cpu")
        records[name].append(t)

    def make_hook(name: str) -> Callable[..., None]:
        if input:

            def pre_hook(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
                keep(name, _input_tensor(args, kwargs, name))

            return pre_hook

        def hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
            keep(name, _first_tensor(output, name, "output"))

        return hook

    handles: list[torch.utils.hooks.RemovableHandle] = []
    try:
        for name, module in modules.items():
            if input:
                handles.append(module.register_forward_pre_hook(make_hook(name), with_kwargs=True))
            else:
                handles.append(module.register_forward_hook(make_hook(name)))
        yield records
    finally:
        for handle in handles:
            handle.remove()


def _replace_first(output: Any, new: Tensor) -> Any:
    if isinstance(output, Tensor):
        return new
    if isinstance(output, tuple):
        rest = output[1:]
        return type(output)(new, *rest) if hasattr(output, "_fields") else (new, *rest)
    if isinstance(output, list):
        return [new, *output[1:]]
    # A ModelOutput: built by this very call, so editing it in place is safe.
    output[next(iter(output.keys()))] = new
    return output


def _check_edit(name: str, what: str, old: Tensor, new: Any) -> None:
    if not isinstance(new, Tensor):
        raise LLMCoreError(
            f"edit for {name!r} returned a {type(new).__name__}, not a tensor or None"
        )
    if new.shape != old.shape:
        raise LLMCoreError(
            f"edit for {name!r} returned shape {tuple(new.shape)}, "
            f"but the {what} has shape {tuple(old.shape)}"
        )


@contextmanager
def intervene(
    model: nn.Module, edits: Mapping[str, Edit], *, input: bool = False
) -> Iterator[None]:
    """Replace the outputs (or inputs, with ``input=True``) of named modules in every forward.

    Outputs: for a tuple/``ModelOutput`` output only the first element is passed to
    ``edit`` and replaced; the rest is kept. Inputs (``input=True``): a forward pre-hook
    (``with_kwargs=True``) edits the first positional argument, or, when the module is called
    with keywords only, the ``hidden_states`` (else first tensor) keyword, so the module
    computes on ``edit(input)``; e.g. zeroing the input of an attention output projection
    removes every head's contribution but keeps its bias. An edit returning ``None`` keeps
    the (possibly in-place edited) tensor; a returned tensor must have the same shape
    (:class:`LLMCoreError` otherwise). Hooks run in registration order, so edits see
    earlier hooks' results.
    """
    modules = _resolve(model, list(edits))

    def make_hook(name: str, edit: Edit) -> Callable[..., Any]:
        def hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> Any:
            old = _first_tensor(output, name, "output")
            new = edit(old)
            if new is None:
                return None
            _check_edit(name, "output", old, new)
            return _replace_first(output, new)

        return hook

    def make_pre_hook(name: str, edit: Edit) -> Callable[..., Any]:
        def pre_hook(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            key = _input_key(args, kwargs, name)
            old = _input_tensor(args, kwargs, name)
            new = edit(old)
            if new is None:
                return None
            _check_edit(name, "input", old, new)
            if isinstance(key, str):
                return args, {**kwargs, key: new}
            return (_replace_first(args[0], new), *args[1:]), kwargs

        return pre_hook

    handles: list[torch.utils.hooks.RemovableHandle] = []
    try:
        for name, module in modules.items():
            if input:
                hook = make_pre_hook(name, edits[name])
                handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))
            else:
                handles.append(module.register_forward_hook(make_hook(name, edits[name])))
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def ablate(
    model: nn.Module,
    names: str | Iterable[str],
    *,
    mode: Literal["zero", "mean"] = "zero",
    means: Mapping[str, Tensor] | None = None,
) -> Iterator[None]:
    """Zero- or mean-ablate the (first) outputs of the named modules; built on :func:`intervene`.

    ``mode="zero"`` replaces the output by zeros. ``mode="mean"`` replaces it by ``means[name]``
    (broadcast to the output, e.g. a ``(hidden,)`` mean over a reference set) or, for names
    without one, by the output's own mean over all but the last dimension (batch and positions
    of the current forward).
    """
    if mode not in ("zero", "mean"):
        raise ConfigError(f"ablation mode must be 'zero' or 'mean', got {mode!r}")
    names = [names] if isinstance(names, str) else list(dict.fromkeys(names))
    means = dict(means or {})
    if means and mode != "mean":
        raise ConfigError("means are only used with mode='mean'")
    if unknown := sorted(set(means) - set(names)):
        raise ConfigError(f"means given for modules that are not ablated: {unknown}")

    def make_edit(name: str) -> Edit:
        if mode == "zero":
            return torch.zeros_like
        if name in means:
            mean = means[name]
            return lambda t: torch.zeros_like(t) + mean.to(device=t.device, dtype=t.dtype)
        return lambda t: t.mean(dim=tuple(range(t.ndim - 1)), keepdim=True).expand_as(t).clone()

    with intervene(model, {name: make_edit(name) for name in names}):
        yield


# --- per-block module names -------------------------------------------------------------------

# Child names tried in order; the first that exists wins.
_ATTN = ("self_attn", "attn", "attention", "self_attention")
_ATTN_OUT = ("o_proj", "c_proj", "dense", "out_proj")
_V_PROJ = ("v_proj",)
_QKV_FUSED = ("c_attn", "query_key_value", "qkv_proj")
_MLP = ("mlp", "feed_forward")
_MLP_DOWN = ("down_proj", "c_proj", "dense_4h_to_h", "fc2")
_INPUT_NORM = ("input_layernorm", "ln_1", "attention_norm")


@dataclass(frozen=True)
class BlockModules:
    """Names (for :func:`get_module`, :func:`capture_activations`, :func:`intervene`) of one
    decoder block's parts.

    ``attn_out`` is the attention output projection (its input is the concatenation of the
    heads' outputs, its output is what the block adds to the residual stream); ``mlp_down``
    is the MLP's last projection. ``v_proj`` is the value projection; when ``v_fused`` is
    true it is a fused query/key/value projection instead (GPT-2 ``c_attn``, GPT-NeoX
    ``query_key_value``), whose output holds the values only as a slice: the last third for
    GPT-2, and per head interleaved ``(q, k, v)`` chunks for GPT-NeoX.
    """

    block: str
    attn: str
    attn_out: str
    v_proj: str
    v_fused: bool
    mlp: str
    mlp_down: str
    input_norm: str


def _child(parent: nn.Module, candidates: tuple[str, ...]) -> str | None:
    for cand in candidates:
        if isinstance(getattr(parent, cand, None), nn.Module):
            return cand
    return None


def block_modules(model: nn.Module, layer: int) -> BlockModules:
    """Module names of decoder layer ``layer`` (negative counts from the end) of ``model``.

    Knows the Llama/Qwen2/Mistral (``self_attn.o_proj``, ``mlp.down_proj``,
    ``input_layernorm``), GPT-2 (``attn.c_proj``, ``mlp.c_proj``, ``ln_1``) and GPT-NeoX
    (``attention.dense``, ``mlp.dense_4h_to_h``) layouts. Raises :class:`ConfigError` for a
    layer index out of range or a layout whose parts it cannot find (naming what it found).
    """
    if isinstance(layer, bool) or not isinstance(layer, int):
        raise ConfigError(f"layer must be an int, got {layer!r}")
    layers = layer_module_names(model)
    if not -len(layers) <= layer < len(layers):
        raise ConfigError(
            f"layer {layer} is out of range: {type(model).__name__} has {len(layers)} layers "
            f"(valid: 0..{len(layers) - 1}, or negative from the end)"
        )
    block_name = layers[layer]
    block = model.get_submodule(block_name)
    cls = type(model).__name__

    def need(what: str, parent: nn.Module, parent_name: str, tried: tuple[str, ...]) -> str:
        """The first of ``tried`` that is a child module of ``parent``, else a ConfigError."""
        name = _child(parent, tried)
        if name is None:
            found = [n for n, _ in parent.named_children()]
            raise ConfigError(
                f"block_modules does not know the layout of {cls}: no {what} "
                f"({'/'.join(tried)}) in {parent_name!r} ({type(parent).__name__}); its children "
                f"are: {', '.join(found) or '(none)'}. Pass module names to the hooks directly "
                "instead."
            )
        return name

    attn = need("attention module", block, block_name, _ATTN)
    attn_mod = getattr(block, attn)
    attn_out = need("attention output projection", attn_mod, f"{block_name}.{attn}", _ATTN_OUT)
    v_fused = _child(attn_mod, _V_PROJ) is None
    v_proj = need("value projection", attn_mod, f"{block_name}.{attn}", _V_PROJ + _QKV_FUSED)
    mlp = need("MLP", block, block_name, _MLP)
    mlp_mod = getattr(block, mlp)
    mlp_down = need("MLP down projection", mlp_mod, f"{block_name}.{mlp}", _MLP_DOWN)
    norm = need("input norm", block, block_name, _INPUT_NORM)
    return BlockModules(
        block=block_name,
        attn=f"{block_name}.{attn}",
        attn_out=f"{block_name}.{attn}.{attn_out}",
        v_proj=f"{block_name}.{attn}.{v_proj}",
        v_fused=v_fused,
        mlp=f"{block_name}.{mlp}",
        mlp_down=f"{block_name}.{mlp}.{mlp_down}",
        input_norm=f"{block_name}.{norm}",
    )
