"""The slim verifier q' = Π_z(q): the target with some decoder layers skipped.

Skipped layers are swapped for pass-through modules that return the residual stream
unchanged, in the return type the original layers use (found with one probe call). The
swap happens inside a context manager, so q itself is untouched outside a slim forward;
q' shares every weight of q and adds no parameters, only its own KV cache.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import nn

from via_sd.errors import UnsupportedModelError, ViaSDConfigError, ViaSDTypeError

LAYER_PATHS = ("model.layers", "transformer.h", "gpt_neox.layers")


def find_layers(model: nn.Module) -> nn.ModuleList:
    """The decoder-layer list: ``model.model.layers``, ``model.transformer.h`` or
    ``model.gpt_neox.layers`` (first that exists)."""
    if not isinstance(model, nn.Module):
        raise ViaSDTypeError(f"expected a torch nn.Module, got {type(model).__name__}")
    for path in LAYER_PATHS:
        obj: Any = model
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if isinstance(obj, nn.ModuleList) and len(obj) > 0:
            return obj
    raise UnsupportedModelError(
        f"cannot find the decoder layers of {type(model).__name__}: tried "
        f"{', '.join('model.' + p for p in LAYER_PATHS)}. Supported: decoder-only Llama/Qwen2/"
        "Mistral/Gemma-style (model.layers), GPT-2 style (transformer.h), GPT-NeoX."
    )


def check_decoder_only(model: nn.Module) -> None:
    """Refuse encoder-decoder models and models without a croppable cache."""
    cfg = getattr(model, "config", None)
    if cfg is not None and getattr(cfg, "is_encoder_decoder", False):
        raise UnsupportedModelError("decoder-only models only in v1 (got an encoder-decoder)")
    find_layers(model)


def _validate_indices(name: str, idx: Sequence[int], num_layers: int) -> list[int]:
    out = []
    for i in idx:
        if isinstance(i, bool) or not isinstance(i, int):
            raise ViaSDConfigError(f"{name} must hold integer layer indices, got {i!r}")
        if not 0 <= i < num_layers:
            raise ViaSDConfigError(
                f"{name} index {i} is outside [0, {num_layers}) for a {num_layers}-layer model"
            )
        out.append(i)
    if len(set(out)) != len(out):
        raise ViaSDConfigError(f"{name} has duplicate indices: {sorted(out)}")
    return sorted(out)


def _check_ratio(skip_ratio: float) -> None:
    if not isinstance(skip_ratio, int | float) or not 0.0 <= skip_ratio < 1.0:
        raise ViaSDConfigError(f"skip_ratio must be in [0, 1), got {skip_ratio!r}")


def num_skipped(num_layers: int, skip_ratio: float, keep_first_last: bool = True) -> int:
    """floor(L * skip_ratio), capped so that the kept first/last layers stay available."""
    _check_ratio(skip_ratio)
    n = int(num_layers * skip_ratio)
    cap = num_layers - 2 if keep_first_last else num_layers - 1
    return max(0, min(n, cap))


def layer_mask_even(num_layers: int, skip_ratio: float, keep_first_last: bool = True) -> list[int]:
    """Evenly spaced skipped layers (the baseline mask): floor(L*r) indices spread
    over the candidate range 1..L-2 (0..L-1 without ``keep_first_last``)."""
    n = num_skipped(num_layers, skip_ratio, keep_first_last)
    lo, hi = (1, num_layers - 2) if keep_first_last else (0, num_layers - 1)
    cands = list(range(lo, hi + 1))
    if n == 0:
        return []
    # centre of n equal bins over the candidates
    picks = {cands[int((k + 0.5) * len(cands) / n)] for k in range(n)}
    return sorted(picks)


def layer_mask_random(
    num_layers: int, skip_ratio: float, seed: int = 0, keep_first_last: bool = True
) -> list[int]:
    """A seeded uniformly random set of floor(L*r) skipped layers among 1..L-2."""
    n = num_skipped(num_layers, skip_ratio, keep_first_last)
    lo, hi = (1, num_layers - 2) if keep_first_last else (0, num_layers - 1)
    return sorted(random.Random(seed).sample(range(lo, hi + 1), n))


class _SkipLayer(nn.Module):
    """Pass-through decoder layer: returns the residual stream in the original return type."""

    def __init__(self, tuple_output: bool) -> None:
        super().__init__()
        self.tuple_output = tuple_output

    def forward(self, hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        return (hidden_states,) if self.tuple_output else hidden_states


class _ZeroAttn(nn.Module):
    """Attention sub-layer that contributes nothing (residual passes through)."""

    def forward(self, hidden_states: torch.Tensor | None = None, *args: Any, **kwargs: Any) -> Any:
        if hidden_states is None:
            hidden_states = kwargs["hidden_states"]
        return torch.zeros_like(hidden_states), None


class _ZeroMLP(nn.Module):
    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(hidden_states)


def new_cache(model: nn.Module) -> Any:
    """A fresh ``DynamicCache`` for ``model``."""
    from transformers import DynamicCache

    return DynamicCache(config=model.config) if hasattr(model, "config") else DynamicCache()


def model_logits(model: nn.Module, input_ids: torch.Tensor, past_key_values: Any = None):
    """Float logits ``[1, T, V]`` of a causal LM, using/extending ``past_key_values``."""
    out = model(input_ids=input_ids, past_key_values=past_key_values, use_cache=True)
    return out.logits


class SlimVerifier:
    """q' = q with the layers in ``skip_layers`` skipped ("intra-model routing").

    ``skip_layers=None`` uses :func:`layer_mask_even` with ``skip_ratio``. ``attn_skip`` and
    ``mlp_skip`` additionally drop single attention/MLP sub-layers (Draft & Verify style).
    Use :meth:`forward` (swaps layers in and out around one call) or ``with slim:`` to run the
    underlying model as q'. Keep a separate cache from :meth:`new_cache` for q'.
    """

    def __init__(
        self,
        model: nn.Module,
        skip_layers: Sequence[int] | None = None,
        skip_ratio: float = 0.45,
        keep_first_last: bool = True,
        attn_skip: Sequence[int] | None = None,
        mlp_skip: Sequence[int] | None = None,
    ) -> None:
        check_decoder_only(model)
        self.model = model
        self.layers = find_layers(model)
        L = len(self.layers)
        _check_ratio(skip_ratio)
        if skip_layers is None:
            skip_layers = layer_mask_even(L, skip_ratio, keep_first_last)
        self.skip_layers = _validate_indices("skip_layers", list(skip_layers), L)
        self.attn_skip = _validate_indices("attn_skip", list(attn_skip or []), L)
        self.mlp_skip = _validate_indices("mlp_skip", list(mlp_skip or []), L)
        self.skip_ratio = float(skip_ratio)
        self.keep_first_last = keep_first_last
        if len(self.skip_layers) >= L:
            raise ViaSDConfigError(f"cannot skip every layer ({L} of {L}); keep at least one")
        if keep_first_last and ({0, L - 1} & set(self.skip_layers)):
            raise ViaSDConfigError(
                f"skip_layers {self.skip_layers} include the first or last layer (0 or {L - 1}) "
                "while keep_first_last=True; drop them or pass keep_first_last=False"
            )
        if 0 in self.skip_layers or 0 in self.attn_skip:
            # DynamicCache reads the cached length from layer 0.
            raise ViaSDConfigError(
                "skipping layer 0 (or its attention) is not supported: the KV cache length is "
                "read from layer 0; keep it"
            )
        self._tuple_output = self._probe()
        self._active = False

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def mask(self) -> list[int]:
        """Keep-mask z ∈ {0,1}^L (1 = layer runs)."""
        s = set(self.skip_layers)
        return [0 if i in s else 1 for i in range(self.num_layers)]

    @property
    def kept_fraction(self) -> float:
        """Fraction of decoder layers q' runs (≈ its per-forward cost c_s relative to q)."""
        return 1.0 - len(self.skip_layers) / self.num_layers

    @property
    def name(self) -> str:
        return "slim"

    def _probe(self) -> bool:
        seen: list[bool] = []
        h = self.layers[0].register_forward_hook(lambda m, i, o: seen.append(isinstance(o, tuple)))
        try:
            dev = next(self.model.parameters()).device
            with torch.no_grad():
                self.model(
                    input_ids=torch.zeros(1, 1, dtype=torch.long, device=dev), use_cache=False
                )
        finally:
            h.remove()
        return bool(seen and seen[0])

    @contextlib.contextmanager
    def active(self) -> Iterator[SlimVerifier]:
        """Swap the skipped (sub-)layers out for pass-throughs; restore on exit."""
        if self._active:
            yield self
            return
        saved: list[tuple[nn.Module, str, nn.Module]] = []
        try:
            for i in self.skip_layers:
                saved.append((self.layers, str(i), self.layers[i]))
                self.layers[i] = _SkipLayer(self._tuple_output)
            for i in self.attn_skip:
                layer = self.layers[i]
                attr = "self_attn" if hasattr(layer, "self_attn") else "attn"
                saved.append((layer, attr, getattr(layer, attr)))
                setattr(layer, attr, _ZeroAttn())
            for i in self.mlp_skip:
                layer = self.layers[i]
                saved.append((layer, "mlp", layer.mlp))
                layer.mlp = _ZeroMLP()
            self._active = True
            yield self
        finally:
            for parent, attr, mod in reversed(saved):
                if isinstance(parent, nn.ModuleList):
                    parent[int(attr)] = mod
                else:
                    setattr(parent, attr, mod)
            self._active = False

    def __enter__(self) -> SlimVerifier:
        self._cm = self.active()
        return self._cm.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._cm.__exit__(*exc)

    def forward(self, input_ids: torch.Tensor, past_key_values: Any = None) -> torch.Tensor:
        """q' logits ``[1, T, V]`` for ``input_ids`` on top of ``past_key_values``."""
        with self.active():
            return model_logits(self.model, input_ids, past_key_values)

    __call__ = forward

    def new_cache(self) -> Any:
        return new_cache(self.model)

    def to_json(self) -> dict[str, Any]:
        return {
            "num_layers": self.num_layers,
            "skip_layers": self.skip_layers,
            "attn_skip": self.attn_skip,
            "mlp_skip": self.mlp_skip,
            "skip_ratio": self.skip_ratio,
        }


class FullModel:
    """Adapter giving a plain causal LM the same ``forward``/``new_cache`` interface."""

    def __init__(self, model: nn.Module, name: str = "target") -> None:
        self.model = model
        self.name = name

    def forward(self, input_ids: torch.Tensor, past_key_values: Any = None) -> torch.Tensor:
        return model_logits(self.model, input_ids, past_key_values)

    __call__ = forward

    def new_cache(self) -> Any:
        return new_cache(self.model)


def load_mask(path: Any, model: nn.Module) -> SlimVerifier:
    """A :class:`SlimVerifier` from a mask JSON (the format :meth:`MaskSearchResult.to_json` writes); its ``num_layers`` must match."""
    import json
    from pathlib import Path

    from via_sd.errors import ViaSDInputError

    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise ViaSDInputError(f"mask file {p} does not exist") from None
    except json.JSONDecodeError as e:
        raise ViaSDInputError(f"mask file {p} is not valid JSON: {e}") from None
    if not isinstance(data, dict) or "skip_layers" not in data:
        raise ViaSDInputError(
            f"mask file {p} needs a 'skip_layers' list (see `via-sd search-mask`)"
        )
    L = len(find_layers(model))
    if data.get("num_layers", L) != L:
        raise ViaSDConfigError(
            f"mask file {p} is for a {data['num_layers']}-layer model but this one has {L}; "
            "search a mask for this model"
        )
    return SlimVerifier(
        model,
        skip_layers=data["skip_layers"],
        attn_skip=data.get("attn_skip") or None,
        mlp_skip=data.get("mlp_skip") or None,
        skip_ratio=data.get("skip_ratio", 0.45),
    )
