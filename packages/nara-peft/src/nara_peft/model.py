"""The NaRA tuner: one shared hypernetwork C(lambda) for all adapted layers (paper §3)."""

from __future__ import annotations

import contextlib
import re
import warnings
import weakref
from collections.abc import Iterator
from typing import Any

import torch
from peft.tuners.tuners_utils import BaseTuner, BaseTunerLayer
from torch import nn
from transformers.pytorch_utils import Conv1D

from nara_peft.config import DEFAULT_TARGETS, LLADA_TARGETS, NaraConfig
from nara_peft.errors import NaraConfigError, NaraMergeError, NaraNoiseLevelError
from nara_peft.layer import CoreState, NaraLayer, NaraLinear
from nara_peft.noise import as_noise_vector, compute_noise_level, make_embedding, make_mapper
from nara_peft.noise import noise_density as _noise_density

NOISE_KWARGS = ("noise_level", "noise_density", "response_mask", "prompt_lengths")
_SHARED_ATTRS = ("nara_mapper", "nara_phi")


class _TargetMapping(dict):
    """Per-architecture default targets: LLaDA's attn_out, else o_proj."""

    def get(self, key: Any, default: Any = None) -> Any:
        return list(LLADA_TARGETS) if key == "llada" else list(DEFAULT_TARGETS)


class NaraModel(BaseTuner):
    """PEFT tuner of NaRA. Owns ``nara_mapper`` / ``nara_phi`` (ModuleDict per adapter) and
    ``nara_const_c`` (ParameterDict, constant mode); the layers read C through a ``CoreState``."""

    prefix: str = "nara_"
    tuner_layer_cls = NaraLayer
    target_module_mapping = _TargetMapping()
    uses_shared_state: bool = True

    # --- construction ------------------------------------------------------------------------
    def _state(self) -> CoreState:
        st = self.__dict__.get("_nara_core_state")
        if st is None:
            st = CoreState()
            st.tuner_ref = weakref.ref(self)
            self.__dict__["_nara_core_state"] = st
            self.__dict__["_nara_context"] = None
            self.__dict__["_nara_merge_noise"] = None
            self.__dict__["_nara_stage1"] = False
            self.__dict__["_nara_warned_const"] = False
        return st

    def _pre_injection_hook(self, model: nn.Module, config: NaraConfig, adapter_name: str) -> None:
        self._ensure_shared(config, adapter_name)

    def _ensure_shared(self, config: NaraConfig, adapter_name: str) -> None:
        """Create the adapter's hypernetwork/embedding (or constant P) once; also reached from
        ``add_adapter``/``load_adapter``, which skip the pre-injection hook."""
        if not isinstance(config, NaraConfig):
            raise NaraConfigError(f"expected a NaraConfig, got {type(config).__name__}")
        self._state()
        if "nara_mapper" not in self._modules:
            self.nara_mapper = nn.ModuleDict({})
            self.nara_phi = nn.ModuleDict({})
            self.nara_const_c = nn.ParameterDict({})
        if adapter_name in self.nara_mapper or adapter_name in self.nara_const_c:
            return
        r = config.r
        # float32 on the model's device, whatever the base dtype
        dev = next((p.device for p in self.model.parameters()), torch.device("cpu"))
        if dev.type == "meta":
            dev = torch.device("cpu")
        if config.input_mode == "constant":
            self.nara_const_c[adapter_name] = nn.Parameter(
                torch.zeros(r, r, dtype=torch.float32, device=dev)
            )
            return
        groups = list(config.mapper_groups) if config.mapper_groups else ["shared"]
        in_dim = config.mapper_input_dim()
        # Seed the mapper's kaiming draws from fourier_seed so two builds of one config agree.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.fourier_seed)
            self.nara_mapper[adapter_name] = nn.ModuleDict(
                {
                    g: make_mapper(
                        in_dim,
                        config.fnn_hidden_size_1,
                        config.fnn_hidden_size_2,
                        r,
                        config.init_c,
                    )
                    for g in groups
                }
            )
            self.nara_phi[adapter_name] = make_embedding(
                config.embedding_type,
                config.embedding_dim,
                config.fourier_scale,
                config.fourier_seed,
            )
        self.nara_mapper[adapter_name].to(dev)
        self.nara_phi[adapter_name].to(dev)

    def _prepare_adapter_config(self, peft_config: NaraConfig, model_config: dict) -> NaraConfig:
        if peft_config.target_modules is None:
            peft_config.target_modules = self.target_module_mapping.get(
                model_config.get("model_type")
            )
            if peft_config.mapper_groups is not None:
                peft_config._check_groups()
        return peft_config

    def _check_target_module_exists(self, peft_config: NaraConfig, key: str) -> Any:
        # LLaDA's head `transformer.ff_out` shares its name with each block's MLP output:
        # adapt `ff_out` only inside `blocks.N.`.
        if key.endswith("ff_out") and re.search(r"(^|\.)blocks\.\d+\.", key) is None:
            return False
        return super()._check_target_module_exists(peft_config, key)

    def _create_and_replace(
        self,
        nara_config: NaraConfig,
        adapter_name: str,
        target: nn.Module,
        target_name: str,
        parent: nn.Module,
        current_key: str,
        **optional_kwargs: Any,
    ) -> None:
        self._ensure_shared(nara_config, adapter_name)
        group = nara_config.group_of(current_key)
        kw = dict(
            r=nara_config.r,
            dropout=nara_config.lora_dropout,
            scaling=nara_config.scaling,
            init=nara_config.init_lora_weights,
            group=group,
        )
        if isinstance(target, NaraLinear):
            target.update_layer(adapter_name, **kw)
            return
        base = target.get_base_layer() if isinstance(target, BaseTunerLayer) else target
        if not isinstance(base, (nn.Linear, Conv1D)):
            raise NaraConfigError(
                f"target module {current_key!r} is a {type(base).__name__}; NaRA adapts only "
                "torch.nn.Linear and transformers Conv1D layers; remove it from target_modules"
            )
        fan = isinstance(base, Conv1D)
        new = NaraLinear(target, adapter_name, self._state(), fan_in_fan_out=fan, **kw)
        if adapter_name not in self.active_adapters:
            new.requires_grad_(False)
        self._replace_module(parent, target_name, new, target)

    def _mark_only_adapters_as_trainable(self, model: nn.Module) -> None:
        super()._mark_only_adapters_as_trainable(model)
        # Mark by identity: the shared mapper lives once on the tuner.
        for name in self.active_adapters:
            cfg = self.peft_config[name]
            live = not cfg.inference_mode
            for m in model.modules():
                if isinstance(m, NaraLinear) and name in m.nara_A:
                    m.nara_A[name].requires_grad_(cfg.train_a and live)
                    m.nara_B[name].requires_grad_(cfg.train_b and live)
            for attr in ("nara_mapper", "nara_phi"):
                container = getattr(self, attr)
                if name in container:
                    container[name].requires_grad_(cfg.train_mapper and live)
            if name in self.nara_const_c:
                self.nara_const_c[name].requires_grad_(cfg.train_mapper and live)

    def set_adapter(self, adapter_name: str | list[str], inference_mode: bool = False) -> None:
        super().set_adapter(adapter_name, inference_mode=inference_mode)
        names = [adapter_name] if isinstance(adapter_name, str) else list(adapter_name)
        for attr in ("nara_mapper", "nara_phi", "nara_const_c"):
            container = getattr(self, attr)
            for key in list(container.keys()):
                train = key in names and not inference_mode
                obj = container[key]
                if isinstance(obj, nn.Parameter):
                    obj.requires_grad_(train)
                else:
                    obj.requires_grad_(train)

    def delete_adapter(self, adapter_name: str) -> None:
        super().delete_adapter(adapter_name)
        for attr in ("nara_mapper", "nara_phi", "nara_const_c"):
            container = getattr(self, attr)
            if adapter_name in container:
                del container[adapter_name]
        self._state().cores.pop(adapter_name, None)

    # --- C(lambda) ---------------------------------------------------------------------------
    def constant_core(self, adapter: str) -> torch.Tensor:
        """C = I + eta * P for ``input_mode='constant'`` ([r, r])."""
        cfg = self.peft_config[adapter]
        p = self.nara_const_c[adapter]
        return torch.eye(cfg.r, device=p.device, dtype=p.dtype) + cfg.c_scale * p

    def core_matrix(
        self,
        noise_level: torch.Tensor | float,
        adapter: str | None = None,
        group: str | None = None,
        noise_density: torch.Tensor | float | None = None,
    ) -> torch.Tensor:
        """C(lambda) = I + eta * reshape(F_phi(e(lambda)), r, r), ``[B, r, r]``."""
        adapter = adapter or self.active_adapters[0]
        cfg: NaraConfig = self.peft_config[adapter]
        if cfg.input_mode == "constant":
            lam = as_noise_vector(noise_level, None)
            return self.constant_core(adapter).expand(lam.numel(), cfg.r, cfg.r)
        group = group or next(iter(self.nara_mapper[adapter].keys()))
        mapper = self.nara_mapper[adapter][group]
        phi = self.nara_phi[adapter]
        dev = mapper[0].weight.device
        feats = []
        if cfg.input_mode in ("nl", "both"):
            feats.append(phi(as_noise_vector(noise_level, None).to(dev)))
        if cfg.input_mode in ("nd", "both"):
            if noise_density is None:
                raise NaraNoiseLevelError(
                    f"input_mode={cfg.input_mode!r} needs a noise density; pass noise_density=... "
                    "or set mask_token_id so it can be computed from the input"
                )
            dens = as_noise_vector(noise_density, None, "noise_density").to(dev)
            feats.append(phi(dens))
        if len(feats) == 2 and feats[0].shape[0] != feats[1].shape[0]:
            n = max(f.shape[0] for f in feats)
            feats = [f.expand(n, -1) for f in feats]
        e = torch.cat(feats, dim=-1)
        out = mapper(e).view(-1, cfg.r, cfg.r)
        eye = torch.eye(cfg.r, device=dev, dtype=out.dtype)
        return eye + cfg.c_scale * out

    def merge_core(self, adapter: str, group: str) -> torch.Tensor:
        """The [r, r] core a merge bakes in; refuses a lambda-dependent adapter without lambda."""
        cfg = self.peft_config[adapter]
        if cfg.input_mode == "constant":
            return self.constant_core(adapter).detach()
        lam0 = self.__dict__.get("_nara_merge_noise")
        if lam0 is None:
            raise NaraMergeError(
                "C depends on the noise level; a merged weight is exact at one lambda only. "
                "Use merge_and_unload(noise_level=lambda0) to bake C(lambda0) explicitly, or keep "
                "the adapter unmerged"
            )
        dens = lam0 if cfg.input_mode in ("nd", "both") else None
        with torch.no_grad():
            return self.core_matrix(lam0, adapter, group, noise_density=dens)[0]

    # --- resolving lambda and publishing C ---------------------------------------
    def _resolve(
        self,
        input_ids: torch.Tensor | None,
        batch: int | None,
        noise_level: Any,
        noise_density: Any,
        response_mask: Any,
        prompt_lengths: Any,
    ) -> dict[str, dict[str, torch.Tensor] | None] | None:
        """Compute C for every active adapter; ``None`` means 'not resolvable yet'."""
        ctx = self.__dict__.get("_nara_context")
        cores: dict[str, dict[str, torch.Tensor] | None] = {}
        for adapter in self.active_adapters:
            if adapter not in self.peft_config:
                continue
            cfg: NaraConfig = self.peft_config[adapter]
            if cfg.input_mode == "constant":
                if noise_level is not None and not self.__dict__["_nara_warned_const"]:
                    warnings.warn(
                        f"adapter {adapter!r} uses input_mode='constant'; noise_level is ignored",
                        stacklevel=4,
                    )
                    self.__dict__["_nara_warned_const"] = True
                cores[adapter] = None
                continue
            lam, dens = noise_level, noise_density
            if lam is None and ctx is not None:
                lam, dens = ctx
            if lam is None and cfg.noise_source == "mask_fraction":
                if input_ids is None:
                    return None
                lam = compute_noise_level(
                    input_ids,
                    cfg.mask_token_id,  # type: ignore[arg-type]
                    prompt_lengths=prompt_lengths if cfg.direct_noise_level else None,
                    response_mask=response_mask if cfg.direct_noise_level else None,
                )
            if lam is None:
                if cfg.on_missing_noise == "identity":
                    cores[adapter] = None
                    continue
                if input_ids is None and batch is None:
                    return None
                raise NaraNoiseLevelError(
                    "no noise level for this forward: pass noise_level=<float or [B] tensor> "
                    "(fraction of masked answer tokens), use nara_peft.noise_context(model, "
                    "lambda), or set noise_source='mask_fraction' with mask_token_id"
                )
            lam_t = as_noise_vector(lam, batch if _numel(lam) > 1 else None)
            if cfg.input_mode in ("nd", "both") and dens is None:
                if input_ids is None or cfg.mask_token_id is None:
                    raise NaraNoiseLevelError(
                        f"input_mode={cfg.input_mode!r} needs noise_density=... or mask_token_id"
                    )
                mask = input_ids == cfg.mask_token_id
                if prompt_lengths is not None:
                    pos = torch.arange(input_ids.shape[1], device=input_ids.device)
                    mask &= pos[None, :] >= torch.as_tensor(prompt_lengths).reshape(-1, 1)
                dens = _noise_density(mask, cfg.density_radius)  # type: ignore[arg-type]
            if dens is not None:
                dens = as_noise_vector(dens, batch if _numel(dens) > 1 else None, "noise_density")
            if self.__dict__["_nara_stage1"]:
                cores[adapter] = None
                continue
            if cfg.pool_noise_level:
                lam_t = lam_t.mean().reshape(1)
                dens = None if dens is None else dens.mean().reshape(1)
            cores[adapter] = {
                g: self.core_matrix(lam_t, adapter, g, noise_density=dens)
                for g in self.nara_mapper[adapter]
            }
        return cores

    @contextlib.contextmanager
    def _publish(self, cores: dict[str, dict[str, torch.Tensor] | None]) -> Iterator[None]:
        st = self._state()
        st.cores = cores
        st.checkpointing = bool(getattr(self.model, "is_gradient_checkpointing", False))
        st.active = True
        try:
            yield
        finally:
            st.active = False
            if not st.checkpointing:
                st.cores = {}

    def _any_enabled(self) -> bool:
        for m in self.model.modules():
            if isinstance(m, NaraLayer):
                return not m.disable_adapters
        return False

    @contextlib.contextmanager
    def _enable_peft_forward_hooks(self, *args: Any, **kwargs: Any) -> Iterator[None]:
        if kwargs.get("adapter_names") is not None:
            raise NaraConfigError(
                "mixed-adapter batches (adapter_names=...) are not supported by NaRA; "
                "call set_adapter(...) and run one adapter per batch"
            )
        input_ids = kwargs.get("input_ids", args[0] if args else None)
        if not isinstance(input_ids, torch.Tensor):
            input_ids = None
        batch = _batch_of(input_ids, kwargs)
        cores = self._resolve(input_ids, batch, *(kwargs.get(k) for k in NOISE_KWARGS))
        if cores is None:  # let NaraModel.forward resolve (it sees input_ids)
            yield
            return
        st = self._state()
        with self._publish(cores):
            st.entered = True
            try:
                yield
            finally:
                st.entered = False

    def forward(
        self,
        *args: Any,
        noise_level: Any = None,
        noise_density: Any = None,
        response_mask: Any = None,
        prompt_lengths: Any = None,
        **kwargs: Any,
    ) -> Any:
        """Pop NaRA's kwargs, resolve lambda, compute C once, run the wrapped model."""
        if kwargs.get("adapter_names") is not None:
            raise NaraConfigError("mixed-adapter batches (adapter_names=...) are not supported")
        st = self._state()
        if st.entered or not self._any_enabled():
            return self.model(*args, **kwargs)
        input_ids = kwargs.get("input_ids", args[0] if args else None)
        if not isinstance(input_ids, torch.Tensor):
            input_ids = None
        batch = _batch_of(input_ids, kwargs)
        cores = self._resolve(
            input_ids,
            batch if batch is not None else 1,
            noise_level,
            noise_density,
            response_mask,
            prompt_lengths,
        )
        assert cores is not None
        with self._publish(cores):
            return self.model(*args, **kwargs)

    # --- merging -----------------------------------------------------------------
    def merge_and_unload(
        self,
        progressbar: bool = False,
        safe_merge: bool = False,
        adapter_names: list[str] | None = None,
        noise_level: float | None = None,
    ) -> nn.Module:
        """Merge into W0; lambda-dependent adapters need an explicit ``noise_level`` (exact there only)."""
        with self._merge_at(noise_level):
            return self._unload_and_optionally_merge(
                progressbar=progressbar, safe_merge=safe_merge, adapter_names=adapter_names
            )

    def merge_adapter(
        self,
        adapter_names: list[str] | None = None,
        safe_merge: bool = False,
        noise_level: float | None = None,
    ) -> None:
        with self._merge_at(noise_level):
            super().merge_adapter(adapter_names=adapter_names, safe_merge=safe_merge)

    @contextlib.contextmanager
    def _merge_at(self, noise_level: float | None) -> Iterator[None]:
        if noise_level is not None:
            lam = as_noise_vector(noise_level, None)
            if lam.numel() != 1:
                raise NaraMergeError("merge needs one scalar noise_level")
            warnings.warn(
                f"merging NaRA at noise_level={float(lam[0]):.4g}: the merged model equals the "
                "adapted one at this lambda only",
                stacklevel=4,
            )
            self.__dict__["_nara_merge_noise"] = float(lam[0])
        self._state()
        try:
            yield
        finally:
            self.__dict__["_nara_merge_noise"] = None

    # --- checkpoints: shared tensors saved once, without the adapter name ---------------------
    @classmethod
    def _remove_adapter_name_from_key(cls, key: str, adapter_name: str) -> str:
        for attr in _SHARED_ATTRS:
            marker = f"{attr}.{adapter_name}."
            if marker in key:
                return key.replace(marker, f"{attr}.", 1)
        return super()._remove_adapter_name_from_key(key, adapter_name)

    @classmethod
    def _remap_adapter_state_dict_for_load(
        cls, model: nn.Module, config: Any, adapter_name: str, state_dict: dict[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        remapped = super()._remap_adapter_state_dict_for_load(
            model, config, adapter_name, state_dict
        )
        own = model.state_dict()
        needed = [
            k
            for k in own
            if any(f"{a}.{adapter_name}" in k for a in (*_SHARED_ATTRS, "nara_const_c"))
        ]
        missing = [k for k in needed if k not in remapped]
        if missing:
            raise NaraConfigError(
                f"the checkpoint lacks NaRA shared tensors {missing[:4]}; refusing to "
                "re-initialise them silently (was it saved by another method or truncated?)"
            )
        for k, v in remapped.items():
            if k in own and own[k].shape != v.shape:
                raise NaraConfigError(
                    f"checkpoint tensor {k!r} has shape {tuple(v.shape)} but the model expects "
                    f"{tuple(own[k].shape)}; r / embedding_dim / input_mode differ from the "
                    "config used to save it"
                )
        return remapped


def _numel(x: Any) -> int:
    return (
        x.numel() if isinstance(x, torch.Tensor) else len(x) if isinstance(x, (list, tuple)) else 1
    )


def _batch_of(input_ids: torch.Tensor | None, kwargs: dict[str, Any]) -> int | None:
    if input_ids is not None:
        return int(input_ids.shape[0])
    emb = kwargs.get("inputs_embeds")
    return int(emb.shape[0]) if isinstance(emb, torch.Tensor) else None


def _tuner(model: nn.Module) -> NaraModel:
    if isinstance(model, NaraModel):
        return model
    base = getattr(model, "base_model", None)
    if isinstance(base, NaraModel):
        return base
    for m in model.modules():
        if isinstance(m, NaraModel):
            return m
    raise NaraConfigError(
        f"{type(model).__name__} carries no NaRA adapter; wrap it with get_nara_model first"
    )


@contextlib.contextmanager
def noise_context(model: nn.Module, noise_level: Any, noise_density: Any = None) -> Iterator[None]:
    """Set lambda for every forward inside the block (for code that cannot pass kwargs)."""
    tuner = _tuner(model)
    tuner._state()
    as_noise_vector(noise_level, None)
    prev = tuner.__dict__.get("_nara_context")
    tuner.__dict__["_nara_context"] = (noise_level, noise_density)
    try:
        yield
    finally:
        tuner.__dict__["_nara_context"] = prev


def core_matrix(model: nn.Module, noise_level: Any, adapter: str | None = None) -> torch.Tensor:
    """C(lambda) of the (active) adapter, ``[B, r, r]``, for inspection and tests."""
    return _tuner(model).core_matrix(noise_level, adapter)


def smoothness_penalty(
    model: nn.Module, noise_level: torch.Tensor | float, delta: float = 0.05
) -> torch.Tensor:
    """Optional regulariser of the reference code (off in its configs):
    MSE(F(e(lambda + delta)), F(e(lambda))), using lambda - delta where lambda + delta > 1."""
    tuner = _tuner(model)
    lam = as_noise_vector(noise_level, None)
    shifted = torch.where(lam + delta > 1.0, lam - delta, lam + delta)
    total = torch.zeros(())
    for adapter in tuner.active_adapters:
        eta = tuner.peft_config[adapter].c_scale
        if tuner.peft_config[adapter].input_mode != "nl" or eta == 0:
            continue
        for g in tuner.nara_mapper[adapter]:
            # (C(a) - C(b)) / eta = F(e(a)) - F(e(b))
            a = tuner.core_matrix(lam, adapter, g)
            b = tuner.core_matrix(shifted, adapter, g)
            total = total + torch.mean(((a - b) / eta) ** 2)
    return total


@contextlib.contextmanager
def stage1(model: nn.Module, enabled: bool = True) -> Iterator[None]:
    """Two-stage schedule: inside, C = I (plain LoRA)."""
    tuner = _tuner(model)
    tuner._state()
    prev = tuner.__dict__["_nara_stage1"]
    tuner.__dict__["_nara_stage1"] = enabled
    try:
        yield
    finally:
        tuner.__dict__["_nara_stage1"] = prev


def _register_on_import() -> None:
    from nara_peft.register import register

    register()


_register_on_import()
