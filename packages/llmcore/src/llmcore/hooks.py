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
from typing import Any, Literal

import torch
from torch import Tensor, nn

from llmcore.errors import ConfigError, LLMCoreError

__all__ = [
    "Edit",
    "ablate",
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


def _input_tensor(args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> Tensor:
    if args:
        return _first_tensor(args[0], name, "first input")
    for key in ("hidden_states", "input", "x", "inputs_embeds", "input_ids"):
        if isinstance(kwargs.get(key), Tensor):
            return kwargs[key]
    for value in kwargs.values():
        if isinstance(value, Tensor):
            return value
    raise LLMCoreError(f"module {name!r} was called without a tensor input")


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


@contextmanager
def intervene(model: nn.Module, edits: Mapping[str, Edit]) -> Iterator[None]:
    """Replace the outputs of named modules with ``edit(output)`` during every forward.

    For a tuple/``ModelOutput`` output only the first element is passed and replaced; the rest
    is kept. An edit returning ``None`` keeps the (possibly in-place edited) output; a returned
    tensor must have the output's shape (:class:`LLMCoreError` otherwise). Hooks run in
    registration order, so edits see earlier hooks' results.
    """
    modules = _resolve(model, list(edits))

    def make_hook(name: str, edit: Edit) -> Callable[..., Any]:
        def hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> Any:
            old = _first_tensor(output, name, "output")
            new = edit(old)
            if new is None:
                return None
            if not isinstance(new, Tensor):
                raise LLMCoreError(
                    f"edit for {name!r} returned a {type(new).__name__}, not a tensor or None"
                )
            if new.shape != old.shape:
                raise LLMCoreError(
                    f"edit for {name!r} returned shape {tuple(new.shape)}, "
                    f"but the output has shape {tuple(old.shape)}"
                )
            return _replace_first(output, new)

        return hook

    handles: list[torch.utils.hooks.RemovableHandle] = []
    try:
        for name, module in modules.items():
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
