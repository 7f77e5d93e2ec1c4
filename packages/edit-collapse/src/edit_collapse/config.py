"""Editor hyperparameters with EasyEdit's names and defaults, its YAML loader, and module
templates filled from the model's architecture."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from edit_collapse.errors import EditInputError, UnsupportedModelError

ALGS = ("FT", "FT-L", "FT-M", "ROME", "MEMIT", "AlphaEdit")


@dataclass
class EditConfig:
    """Hyperparameters of the parametric editors (EasyEdit ``hparams/<METHOD>/*.yaml`` names).

    Module templates left empty are filled by :func:`auto_module_templates`."""

    alg_name: str = "ROME"
    """``FT`` (``objective_optimization`` picks FT-L/FT-M), ``ROME``, ``MEMIT`` or ``AlphaEdit``."""
    model_name: str = ""
    """Hub id or path the config was written for (informational)."""
    device: int | str = 0
    """EasyEdit's device field (informational; editors use the model's device)."""
    layers: list[int] = field(default_factory=lambda: [5])
    """Edited layers (ROME: one; MEMIT/AlphaEdit: ascending list; FT: layers whose
    ``rewrite_module_tmp`` weights are trained)."""
    fact_token: str = "subject_last"
    """Where keys are read: ``subject_last`` (the subject's last token) or ``last``."""
    v_num_grad_steps: int = 25
    v_lr: float = 5e-1
    v_loss_layer: int = -1
    """Layer whose output gives the v* loss; -1 means the last layer (the model's logits)."""
    v_weight_decay: float = 1e-3
    clamp_norm_factor: float = 4.0
    """||delta|| <= clamp_norm_factor * ||v|| (ROME/MEMIT/AlphaEdit)."""
    kl_factor: float = 0.0625
    """Weight of the KL term on the ``{subject} is a`` essence prompt."""
    mom2_adjustment: bool = False
    """ROME: use ``C = E[k k^T]`` in the rank-one update (identity when false)."""
    mom2_update_weight: float = 15000.0
    """MEMIT's lambda in ``(lambda C_0 + K K^T)^-1``."""
    mom2_dataset: str = "wikipedia"
    mom2_n_samples: int = 100000
    """Number of token keys in the covariance statistics (CPU default in tests: 2000)."""
    mom2_dtype: str = "float32"
    rewrite_module_tmp: str = ""
    """e.g. ``model.layers.{}.mlp.down_proj``."""
    layer_module_tmp: str = ""
    mlp_module_tmp: str = ""
    attn_module_tmp: str = ""
    ln_f_module: str = ""
    lm_head_module: str = ""
    context_template_length_params: list[list[int]] = field(
        default_factory=lambda: [[5, 10], [10, 10]]
    )
    """``[length, count]`` pairs of model-generated prefixes (plus the empty prefix)."""
    nullspace_threshold: float = 2e-2
    """AlphaEdit: eigenvectors of ``K_0 K_0^T`` (the statistics ``C_0``) with eigenvalue below this
    span the null space the update is projected on. The default is EasyEdit's Llama-3-8B value; it
    depends on the scale of the keys, so check the spectrum of ``C_0`` on another model."""
    L2: float = 10.0
    """AlphaEdit's ridge term (added to the projected ``K K^T``; large against small keys, it
    damps the update)."""
    P_loc: str = ""
    """AlphaEdit: optional path of a precomputed projector (unused when empty)."""
    stats_dir: str = ""
    """Covariance cache folder; empty means ``llmcore.zoo.artifact_dir('edit-collapse')``."""
    # FT
    num_steps: int = 25
    lr: float = 5e-4
    weight_decay: float = 0.0
    norm_constraint: float | bool = False
    max_length: int = 40
    batch_size: int = 1
    objective_optimization: str = "target_new"
    """FT-M (``target_new``: CE on every target token) or FT-L (``prompt_last``)."""
    seed: int = 0
    """Seed of prefix sampling and of the v* optimisation."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Unknown YAML keys, kept as read (a warning names them)."""

    def __post_init__(self) -> None:
        if self.alg_name not in ALGS:
            raise EditInputError(f"alg_name={self.alg_name!r} is not one of {ALGS}")
        if self.objective_optimization not in ("target_new", "prompt_last"):
            raise EditInputError(
                f"objective_optimization={self.objective_optimization!r}: use 'target_new' "
                "(FT-M) or 'prompt_last' (FT-L)"
            )
        if self.fact_token not in ("subject_last", "last"):
            raise EditInputError(f"fact_token={self.fact_token!r}: use 'subject_last' or 'last'")
        if list(self.layers) != sorted(set(self.layers)):
            raise EditInputError(f"layers={self.layers} must be ascending and distinct")


def easyedit_defaults(alg: str) -> EditConfig:
    """EasyEdit's Llama-3-8B defaults for ``alg`` (FT-M, FT-L, ROME, MEMIT, AlphaEdit)."""
    if alg in ("FT", "FT-M"):
        return EditConfig(alg_name="FT", layers=[21])
    if alg == "FT-L":
        return EditConfig(alg_name="FT", layers=[21], objective_optimization="prompt_last")
    if alg == "ROME":
        return EditConfig(alg_name="ROME", layers=[5])
    if alg == "MEMIT":
        return EditConfig(alg_name="MEMIT", layers=[4, 5, 6, 7, 8], clamp_norm_factor=0.75)
    if alg == "AlphaEdit":
        return EditConfig(
            alg_name="AlphaEdit", layers=[4, 5, 6, 7, 8], clamp_norm_factor=0.75, v_lr=1e-1,
            v_weight_decay=0.5,
        )  # fmt: skip
    raise EditInputError(f"unknown editor {alg!r}; known: {ALGS}")


def load_hparams(path: str | Path) -> EditConfig:
    """Read an EasyEdit hparams YAML into an :class:`EditConfig`. Unknown keys are kept in
    ``extra`` with a warning naming them (EasyEdit files carry keys for other tools)."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise EditInputError(f"hparams file {str(p)!r} does not exist")
    data = yaml.safe_load(p.read_text()) or {}
    if not isinstance(data, dict):
        raise EditInputError(f"hparams file {str(p)!r} must hold a mapping, got {type(data)}")
    return config_from_mapping(data, source=str(p))


def config_from_mapping(data: dict[str, Any], source: str = "<dict>") -> EditConfig:
    """An :class:`EditConfig` from an EasyEdit-style mapping (unknown keys warned, kept)."""
    known = {f.name for f in fields(EditConfig)} - {"extra"}
    kw = {k: v for k, v in data.items() if k in known}
    unknown = {k: v for k, v in data.items() if k not in known}
    if unknown:
        warnings.warn(
            f"{source}: keeping unknown hparams key(s) {sorted(unknown)} in EditConfig.extra",
            stacklevel=2,
        )
    if kw.get("alg_name") == "FT-L":
        kw["alg_name"], kw["objective_optimization"] = "FT", "prompt_last"
    elif kw.get("alg_name") == "FT-M":
        kw["alg_name"], kw["objective_optimization"] = "FT", "target_new"
    if kw.get("norm_constraint") is None:
        kw["norm_constraint"] = False
    return EditConfig(**kw, extra=unknown)


def check_model(model: Any) -> None:
    """Refuse encoder-decoder models (the editors address decoder blocks)."""
    if getattr(model.config, "is_encoder_decoder", False):
        raise UnsupportedModelError(
            f"{type(model).__name__} is an encoder-decoder model; edit-collapse edits "
            "decoder-only causal LMs (Llama, Qwen2, Mistral, GPT-2)"
        )


def auto_module_templates(model: Any, cfg: EditConfig | None = None) -> EditConfig:
    """Fill empty module templates of ``cfg`` from the architecture (``hooks.block_modules``):
    rewrite (MLP down-projection), layer, mlp, attn, final norm, lm head; ``v_loss_layer`` -1
    becomes the last layer. Checks that every edited layer exists."""
    from llmcore.errors import ConfigError
    from llmcore.hooks import block_modules

    check_model(model)
    cfg = cfg or EditConfig()
    try:
        bm = block_modules(model, 0)
    except ConfigError as e:
        raise EditInputError(f"cannot locate decoder blocks: {e}") from None
    n_layers = model.config.num_hidden_layers

    def tmp(name: str) -> str:
        return name.replace(".0.", ".{}.", 1) if ".0." in name else name.replace(".0", ".{}", 1)

    cfg.rewrite_module_tmp = cfg.rewrite_module_tmp or tmp(bm.mlp_down)
    cfg.layer_module_tmp = cfg.layer_module_tmp or tmp(bm.block)
    cfg.mlp_module_tmp = cfg.mlp_module_tmp or tmp(bm.mlp)
    cfg.attn_module_tmp = cfg.attn_module_tmp or tmp(bm.attn)
    names = dict(model.named_modules())
    if not cfg.ln_f_module:
        cfg.ln_f_module = next(
            (
                n
                for n in ("model.norm", "transformer.ln_f", "gpt_neox.final_layer_norm")
                if n in names
            ),
            "",
        )
    if not cfg.lm_head_module:
        cfg.lm_head_module = "lm_head" if "lm_head" in names else "embed_out"
    if cfg.v_loss_layer < 0:
        cfg.v_loss_layer = n_layers + cfg.v_loss_layer
    for layer in cfg.layers:
        if not 0 <= layer < n_layers:
            raise EditInputError(
                f"layer {layer} is out of range: the model has {n_layers} layers "
                f"(0..{n_layers - 1}); layer modules: {cfg.layer_module_tmp.format('N')}"
            )
        name = cfg.rewrite_module_tmp.format(layer)
        if name not in names:
            near = sorted(n for n in names if n.endswith(name.rsplit(".", 1)[-1]))[:12]
            raise EditInputError(
                f"rewrite_module_tmp {cfg.rewrite_module_tmp!r} gives {name!r}, which is not a "
                f"module of {type(model).__name__}; modules with that suffix: {near or '-'}; "
                f"block {layer} holds {sorted(n for n in names if n.startswith(bm.block.replace('.0', f'.{layer}', 1) + '.'))[:20]}"
            )
    return cfg
