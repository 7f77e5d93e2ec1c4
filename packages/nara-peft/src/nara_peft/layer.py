"""Adapted layers: ``y = W0 x + s * ((dropout(x) A^T) C) B^T``."""

from __future__ import annotations

import math
import weakref
from typing import TYPE_CHECKING, Any

import torch
from peft.tuners.tuners_utils import BaseTunerLayer, check_adapters_to_merge
from torch import nn
from transformers.pytorch_utils import Conv1D

from nara_peft.errors import NaraNoiseLevelError

if TYPE_CHECKING:
    from nara_peft.model import NaraModel


class CoreState:
    """Per-tuner slot through which one forward's C(lambda) reaches every layer.

    A plain Python object (not a module or buffer), so it never enters ``state_dict``."""

    def __init__(self) -> None:
        self.cores: dict[str, dict[str, torch.Tensor] | None] = {}
        self.active = False  # inside a NaRA forward
        self.entered = False  # published by the PEFT forward hook (NaraModel.forward skips)
        self.checkpointing = False  # last forward ran with gradient checkpointing
        self.tuner_ref: weakref.ReferenceType[NaraModel] | None = None

    def tuner(self) -> NaraModel:
        t = self.tuner_ref() if self.tuner_ref is not None else None
        if t is None:
            raise NaraNoiseLevelError("this NaRA layer is detached from its NaraModel")
        return t


class NaraLayer(BaseTunerLayer):
    """Holds the per-layer factors A (r x d_in) and B (d_out x r) of each adapter."""

    adapter_layer_names: tuple[str, ...] = ("nara_A", "nara_B")
    other_param_names: tuple[str, ...] = ("r", "scaling", "nara_dropout", "nara_group")

    def __init__(self, base_layer: nn.Module, state: CoreState) -> None:
        self.base_layer = base_layer
        self.nara_A = nn.ModuleDict({})
        self.nara_B = nn.ModuleDict({})
        self.nara_dropout = nn.ModuleDict({})
        self.r: dict[str, int] = {}
        self.scaling: dict[str, float] = {}
        self.nara_group: dict[str, str] = {}
        self._nara_state = state
        self._merged_delta: dict[str, torch.Tensor] = {}
        self._disable_adapters = False
        self.merged_adapters: list[str] = []
        base = self.get_base_layer()
        if isinstance(base, nn.Linear):
            self.in_features, self.out_features = base.in_features, base.out_features
        elif isinstance(base, Conv1D):
            self.in_features, self.out_features = base.weight.shape
        else:  # guarded earlier by NaraModel._create_new_module
            raise TypeError(f"unsupported base layer {type(base).__name__}")

    def update_layer(
        self, adapter_name: str, r: int, dropout: float, scaling: float, init: bool, group: str
    ) -> None:
        """Create A, B, dropout for ``adapter_name`` (A kaiming-uniform(a=sqrt 5), B zero)."""
        self.r[adapter_name] = r
        self.scaling[adapter_name] = scaling
        self.nara_group[adapter_name] = group
        self.nara_dropout[adapter_name] = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.nara_A[adapter_name] = nn.Linear(self.in_features, r, bias=False)
        self.nara_B[adapter_name] = nn.Linear(r, self.out_features, bias=False)
        with torch.no_grad():
            nn.init.kaiming_uniform_(self.nara_A[adapter_name].weight, a=math.sqrt(5))
            if init:
                nn.init.zeros_(self.nara_B[adapter_name].weight)
            else:
                nn.init.kaiming_uniform_(self.nara_B[adapter_name].weight, a=math.sqrt(5))
        self._move_adapter_to_device_of_base_layer(adapter_name)
        self.set_adapter(self.active_adapters)


def _apply_core(z: torch.Tensor, core: torch.Tensor) -> torch.Tensor:
    """z @ C with C [r, r] (shared) or [B, r, r] (one per example; batch dim must match)."""
    core = core.to(device=z.device, dtype=z.dtype)
    if core.dim() == 2:
        return z @ core
    if core.shape[0] == 1:
        return z @ core[0]
    if z.dim() < 3 or z.shape[0] != core.shape[0]:
        raise NaraNoiseLevelError(
            f"C(lambda) has {core.shape[0]} rows but the layer input has shape "
            f"{tuple(z.shape)}; pass one noise level per batch row (or a scalar)"
        )
    lead = z.shape
    return torch.bmm(z.reshape(lead[0], -1, lead[-1]), core).reshape(lead)


class NaraLinear(nn.Module, NaraLayer):
    """NaRA around ``nn.Linear`` or transformers ``Conv1D`` (``fan_in_fan_out``)."""

    def __init__(
        self,
        base_layer: nn.Module,
        adapter_name: str,
        state: CoreState,
        *,
        r: int,
        dropout: float,
        scaling: float,
        init: bool,
        group: str,
        fan_in_fan_out: bool = False,
    ) -> None:
        super().__init__()
        NaraLayer.__init__(self, base_layer, state)
        self.fan_in_fan_out = fan_in_fan_out
        self._active_adapter = adapter_name
        self.update_layer(adapter_name, r, dropout, scaling, init, group)

    # --- the core C for one adapter in the current forward ---------------------------------
    def _core(self, adapter: str) -> torch.Tensor | None:
        st = self._nara_state
        tuner = st.tuner()
        cfg = tuner.peft_config[adapter]
        if cfg.input_mode == "constant":
            return tuner.constant_core(adapter)
        if not st.active and not (st.checkpointing and st.cores):
            if cfg.on_missing_noise == "identity":
                return None
            raise NaraNoiseLevelError(
                "a NaRA layer was called outside a forward of the NaRA model, so no noise level "
                "is set; call the PeftModel with noise_level=..., or wrap the call in "
                "nara_peft.noise_context(model, noise_level)"
            )
        cores = st.cores.get(adapter)
        if cores is None:
            return None  # resolved to identity (on_missing_noise='identity' or stage 1)
        return cores[self.nara_group[adapter]]

    def forward(self, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        if kwargs.get("adapter_names") is not None:
            from nara_peft.errors import NaraConfigError

            raise NaraConfigError("mixed-adapter batches (adapter_names=...) are not supported")
        if self.disable_adapters:
            if self.merged:
                self.unmerge()
            return self.base_layer(x, *args, **kwargs)
        if self.merged:
            return self.base_layer(x, *args, **kwargs)
        result = self.base_layer(x, *args, **kwargs)
        out_dtype = result.dtype
        for adapter in self.active_adapters:
            if adapter not in self.nara_A:
                continue
            A, B = self.nara_A[adapter], self.nara_B[adapter]
            core = self._core(adapter)
            z = A(self.nara_dropout[adapter](x.to(A.weight.dtype)))
            if core is not None:
                z = _apply_core(z, core)
            result = result + B(z) * self.scaling[adapter]
        return result.to(out_dtype)

    # --- merging ----------------------------------------------------------------
    def get_delta_weight(self, adapter: str, core: torch.Tensor) -> torch.Tensor:
        """Delta W = s * B C^T A (in the base weight's layout)."""
        A = self.nara_A[adapter].weight.float()
        B = self.nara_B[adapter].weight.float()
        delta = self.scaling[adapter] * (B @ core.float().T @ A)
        return delta.T if self.fan_in_fan_out else delta

    def merge(self, safe_merge: bool = False, adapter_names: list[str] | None = None) -> None:
        adapters = check_adapters_to_merge(self, adapter_names)
        tuner = self._nara_state.tuner()
        for adapter in adapters:
            if adapter not in self.nara_A:
                continue
            core = tuner.merge_core(adapter, self.nara_group[adapter])
            base = self.get_base_layer()
            delta = self.get_delta_weight(adapter, core).to(base.weight.dtype)
            if safe_merge and not torch.isfinite(base.weight.data + delta).all():
                raise ValueError(f"NaN/inf in the merged weight of adapter {adapter!r}")
            base.weight.data += delta
            self._merged_delta[adapter] = delta
            self.merged_adapters.append(adapter)

    def unmerge(self) -> None:
        while self.merged_adapters:
            adapter = self.merged_adapters.pop()
            delta = self._merged_delta.pop(adapter)
            self.get_base_layer().weight.data -= delta

    def __repr__(self) -> str:
        return "nara." + super().__repr__()
