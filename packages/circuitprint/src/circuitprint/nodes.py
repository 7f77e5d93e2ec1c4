"""Nodes and gates of the owner side: MLP neurons, attention heads or transcoder features,
each with a multiplicative gate applied by forward pre-hooks (method section 2.1)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from circuitprint.errors import UnsupportedModelError

SUPPORTED = "LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM (and GPT-2/GPT-NeoX layouts)"


@dataclass(frozen=True)
class NodeSpec:
    """Which units are nodes."""

    basis: Literal["neuron", "head", "transcoder"] = "neuron"
    """``neuron``: MLP hidden unit (input of ``down_proj``); ``head``: attention head (input of
    ``o_proj`` split into heads); ``transcoder``: feature of a per-layer transcoder."""
    layers: tuple[int, ...] | None = None
    """Decoder layers to gate (``None``: all)."""
    positions: Literal["roles"] = "roles"
    """Nodes live at the probe's role positions (subject token, last token)."""
    transcoder: str | None = None
    """safetensors file of the transcoders (``transcoder`` basis; see :class:`Transcoder`)."""


@dataclass
class Transcoder:
    """Per-layer transcoders read natively from safetensors: keys ``{l}.W_enc`` (d_model x F),
    ``{l}.b_enc`` (F), ``{l}.W_dec`` (F x d_model), ``{l}.b_dec`` (d_model). Features
    f = ReLU(x W_enc + b_enc) of the MLP input x; the MLP output keeps its error term, so gating
    feature i by g adds (g - 1) f_i W_dec[i] to it (an exact identity at g = 1)."""

    W_enc: dict[int, torch.Tensor] = field(default_factory=dict)
    b_enc: dict[int, torch.Tensor] = field(default_factory=dict)
    W_dec: dict[int, torch.Tensor] = field(default_factory=dict)
    b_dec: dict[int, torch.Tensor] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str) -> Transcoder:
        from pathlib import Path

        from safetensors.torch import load_file

        if not Path(path).is_file():
            raise UnsupportedModelError(
                f"transcoder file {path!r} not found; the transcoder basis needs a safetensors "
                "file with {l}.W_enc/b_enc/W_dec/b_dec per layer (or use basis='neuron')"
            )
        tc = cls()
        for k, v in load_file(path).items():
            layer, name = k.split(".", 1)
            getattr(tc, name)[int(layer)] = v.float()
        return tc

    def save(self, path: str) -> None:
        from safetensors.torch import save_file

        out = {}
        for name in ("W_enc", "b_enc", "W_dec", "b_dec"):
            for layer, t in getattr(self, name).items():
                out[f"{layer}.{name}"] = t.contiguous()
        save_file(out, path)

    @classmethod
    def random(cls, model: Any, n_features: int = 32, seed: int = 0) -> Transcoder:
        """A random transcoder for every layer (tests)."""
        g = torch.Generator().manual_seed(seed)
        d = model.config.hidden_size
        tc = cls()
        for layer in range(model.config.num_hidden_layers):
            tc.W_enc[layer] = torch.randn(d, n_features, generator=g) / d**0.5
            tc.b_enc[layer] = torch.zeros(n_features)
            tc.W_dec[layer] = torch.randn(n_features, d, generator=g) / n_features**0.5
            tc.b_dec[layer] = torch.zeros(d)
        return tc


@dataclass(frozen=True)
class GateRule:
    """Set nodes ``units`` of ``layer`` at ``positions`` (one per batch row, or one for all)
    to ``base + gate * (o - base)``: ``gate`` 0 with base 0 zeroes, -1 inhibits, 0 with
    base = mean activation mean-ablates."""

    layer: int
    units: torch.Tensor
    positions: torch.Tensor | int
    gate: float = 0.0
    base: torch.Tensor | None = None  # (len(units),) or (len(units), d_head)


def _n_layers(model: Any) -> int:
    from llmcore.hooks import layer_module_names

    return len(layer_module_names(model))


class GatedModel:
    """Context manager that exposes every node's output o_v and a gate g_v per node.

    ``run(input_ids, attention_mask=None, gates=None, cache=True)`` returns (logits, acts):
    ``gates`` maps a layer to a (B, T, U) tensor of multiplicative gates (U units: neurons,
    heads or features; all ones is the plain model, bit for bit), ``acts`` maps a layer to the
    node outputs (B, T, U) for neurons/features or (B, T, H, d_head) for heads. Gate rules set
    with :meth:`rules` apply to any forward inside the context.
    """

    def __init__(self, model: Any, node_spec: NodeSpec | None = None) -> None:
        from llmcore.errors import ConfigError
        from llmcore.hooks import block_modules, get_module

        self.model = model
        self.spec = node_spec or NodeSpec()
        try:
            n = _n_layers(model)
            self.layers = list(self.spec.layers) if self.spec.layers is not None else list(range(n))
            self.blocks = {i: block_modules(model, i) for i in self.layers}
        except ConfigError as e:
            raise UnsupportedModelError(
                f"{type(model).__name__} has no decoder-block layout circuitprint can gate "
                f"({e}); supported: {SUPPORTED}"
            ) from e
        cfg = model.config
        self.n_heads = int(cfg.num_attention_heads)
        self.transcoder: Transcoder | None = None
        if self.spec.basis == "neuron":
            self.names = {i: b.mlp_down for i, b in self.blocks.items()}
        elif self.spec.basis == "head":
            self.names = {i: b.attn_out for i, b in self.blocks.items()}
        elif self.spec.basis == "transcoder":
            if not self.spec.transcoder:
                raise UnsupportedModelError(
                    "the transcoder basis needs NodeSpec(transcoder='file.safetensors') with one "
                    "transcoder per gated layer (or use basis='neuron')"
                )
            self.transcoder = Transcoder.load(self.spec.transcoder)
            missing = [i for i in self.layers if i not in self.transcoder.W_enc]
            if missing:
                raise UnsupportedModelError(
                    f"transcoder {self.spec.transcoder!r} has no layer(s) {missing}"
                )
            self.names = {i: b.mlp for i, b in self.blocks.items()}
        else:
            raise UnsupportedModelError(
                f"node basis {self.spec.basis!r}: use 'neuron', 'head' or 'transcoder'"
            )
        for name in self.names.values():
            mod = get_module(model, name)
            if self.spec.basis != "transcoder" and not isinstance(mod, torch.nn.Linear):
                raise UnsupportedModelError(
                    f"{name} of {type(model).__name__} is {type(mod).__name__}, not a Linear "
                    f"projection to gate; supported: {SUPPORTED}"
                )
        self._gates: dict[int, torch.Tensor] = {}
        self._rules: dict[int, list[GateRule]] = {}
        self._acts: dict[int, torch.Tensor] = {}
        self._cache = False
        self._mlp_in: dict[int, torch.Tensor] = {}
        self._stack: contextlib.ExitStack | None = None

    def n_units(self, layer: int) -> int:
        from llmcore.hooks import get_module

        if self.spec.basis == "neuron":
            return int(get_module(self.model, self.names[layer]).in_features)
        if self.spec.basis == "head":
            return self.n_heads
        assert self.transcoder is not None
        return int(self.transcoder.W_enc[layer].shape[1])

    # -- hooks ---------------------------------------------------------------------------
    def _gate(self, layer: int, o: torch.Tensor) -> torch.Tensor:
        g = self._gates.get(layer)
        if g is not None:
            o = o * (g[..., None] if o.dim() == 4 else g)
        rules = self._rules.get(layer)
        if rules:
            o = o.clone()
            rows = torch.arange(o.shape[0])
            for r in rules:
                pos = r.positions
                pos = pos if isinstance(pos, torch.Tensor) else torch.full_like(rows, int(pos))
                ri, ui = rows[:, None], r.units[None, :]
                cur = o[ri, pos[:, None], ui]
                base = torch.zeros_like(cur) if r.base is None else r.base.to(cur).expand_as(cur)
                o[ri, pos[:, None], ui] = base + r.gate * (cur - base)
        return o

    def _edit_proj(self, layer: int):
        def edit(x: torch.Tensor):
            if not (self._cache or layer in self._gates or layer in self._rules):
                return None
            o = x.view(*x.shape[:-1], self.n_heads, -1) if self.spec.basis == "head" else x
            if self._cache:
                self._acts[layer] = o
            if layer not in self._gates and layer not in self._rules:
                return None
            return self._gate(layer, o).reshape(x.shape)

        return edit

    def _save_in(self, layer: int):
        def edit(x: torch.Tensor):
            self._mlp_in[layer] = x
            return None

        return edit

    def _edit_mlp_out(self, layer: int):
        tc = self.transcoder
        assert tc is not None

        def edit(out: torch.Tensor):
            x = self._mlp_in[layer]
            f = torch.relu(x @ tc.W_enc[layer].to(x) + tc.b_enc[layer].to(x))
            if self._cache:
                self._acts[layer] = f
            if not (self._cache or layer in self._gates or layer in self._rules):
                return None
            fn = self._gate(layer, f) if (layer in self._gates or layer in self._rules) else f
            # (fn - f.detach()) is exactly 0 without gates, and carries d out / d f = W_dec.
            return out + (fn - f.detach()) @ tc.W_dec[layer].to(x)

        return edit

    def __enter__(self) -> GatedModel:
        from llmcore.hooks import intervene

        self._stack = contextlib.ExitStack()
        if self.spec.basis == "transcoder":
            self._stack.enter_context(
                intervene(
                    self.model, {self.names[i]: self._save_in(i) for i in self.layers}, input=True
                )
            )
            self._stack.enter_context(
                intervene(self.model, {self.names[i]: self._edit_mlp_out(i) for i in self.layers})
            )
        else:
            self._stack.enter_context(
                intervene(
                    self.model, {self.names[i]: self._edit_proj(i) for i in self.layers}, input=True
                )
            )
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stack is not None
        self._stack.close()
        self._stack = None
        self._acts, self._mlp_in = {}, {}

    @contextlib.contextmanager
    def rules(self, rules: Sequence[GateRule]) -> Iterator[None]:
        """Apply gate rules to every forward inside the block."""
        old = self._rules
        self._rules = {}
        for r in rules:
            self._rules.setdefault(r.layer, []).append(r)
        try:
            yield
        finally:
            self._rules = old

    def run(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        gates: Mapping[int, torch.Tensor] | None = None,
        cache: bool = True,
    ) -> tuple[torch.Tensor, dict[int, torch.Tensor]]:
        """Forward with ``gates``; returns (logits, node outputs per layer)."""
        if self._stack is None:
            raise RuntimeError("GatedModel.run must be called inside `with GatedModel(...)`")
        self._gates = dict(gates or {})
        self._cache, self._acts = cache, {}
        try:
            logits = self.model(input_ids=input_ids, attention_mask=attention_mask).logits
            return logits, dict(self._acts)
        finally:
            self._gates, self._cache = {}, False


@contextlib.contextmanager
def gated(model: Any, rules: Sequence[GateRule], node_spec: NodeSpec | None = None):
    """Apply ``rules`` to every forward of ``model`` inside the block."""
    with GatedModel(model, node_spec) as gm, gm.rules(rules):
        yield gm
