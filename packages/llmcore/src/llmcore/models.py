"""Loading causal LMs and tokenizers from a hub id or a local path, with clear errors."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmcore.errors import ModelLoadError
from llmcore.runtime import select_device, select_dtype

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)


def _looks_like_path(name: str) -> bool:
    """True when ``name`` cannot be a hub id ("name" or "org/name"), so it must be a path."""
    return name.startswith((".", "/", "~")) or name.count("/") > 1 or "\\" in name


def _check_local(name_or_path: str | os.PathLike[str], what: str) -> str:
    name = os.fspath(name_or_path)
    path = Path(name).expanduser()
    if path.exists():
        if path.is_dir() and what == "model" and is_adapter_dir(path):
            raise ModelLoadError(
                f"{name!r} holds a PEFT adapter (adapter_config.json), not a whole model; load "
                "it with load_model_and_tokenizer (which attaches it to its base model) or "
                "attach it to a loaded base model with load_adapter"
            )
        if path.is_dir() and what == "model" and not (path / "config.json").exists():
            raise ModelLoadError(
                f"{name!r} is a directory but holds no config.json, so it is not a saved "
                "transformers model; pass a directory written by save_pretrained or a hub id"
            )
        return str(path)
    if _looks_like_path(name):
        raise ModelLoadError(f"{what} path {name!r} does not exist")
    return name


def load_causal_lm(
    name_or_path: str | os.PathLike[str],
    *,
    dtype: Any = None,
    device: str | None = None,
    trust_remote_code: bool = False,
    revision: str | None = None,
    **kwargs: Any,
) -> PreTrainedModel:
    """Load an ``AutoModelForCausalLM`` (safetensors only) in eval mode on ``device``.

    ``name_or_path`` is a hub id or a local directory; ``dtype``/``device`` default to
    :func:`~llmcore.runtime.select_dtype` / :func:`~llmcore.runtime.select_device`.
    Raises :class:`ModelLoadError` for a missing path, a directory without a model, or a hub id
    that cannot be reached, instead of a deep traceback."""
    from transformers import AutoModelForCausalLM

    name = _check_local(name_or_path, "model")
    dev = select_device(device)
    torch_dtype = select_dtype(dtype, dev)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            name,
            dtype=torch_dtype,
            use_safetensors=True,
            trust_remote_code=trust_remote_code,
            revision=revision,
            **kwargs,
        )
    except (OSError, ValueError, KeyError) as exc:
        raise ModelLoadError(_explain(name, "model", exc)) from exc
    model.to(dev)
    model.eval()
    return model


def load_tokenizer(
    name_or_path: str | os.PathLike[str],
    *,
    padding_side: str | None = "left",
    trust_remote_code: bool = False,
    revision: str | None = None,
    **kwargs: Any,
) -> PreTrainedTokenizerBase:
    """Load an ``AutoTokenizer``; sets ``padding_side`` (left by default, for batched
    generation) and falls back to eos as the pad token when the tokenizer has none."""
    from transformers import AutoTokenizer

    name = _check_local(name_or_path, "tokenizer")
    try:
        tok = AutoTokenizer.from_pretrained(
            name, trust_remote_code=trust_remote_code, revision=revision, **kwargs
        )
    except (OSError, ValueError, KeyError) as exc:
        raise ModelLoadError(_explain(name, "tokenizer", exc)) from exc
    if padding_side is not None:
        tok.padding_side = padding_side
    if tok.pad_token is None and tok.eos_token is not None:
        tok.pad_token = tok.eos_token
    return tok


def load_model_and_tokenizer(
    name_or_path: str | os.PathLike[str],
    *,
    base_model: str | os.PathLike[str] | None = None,
    merge_adapter: bool = False,
    **kwargs: Any,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Both of the above from one path or id (model kwargs are passed to the model loader).

    The model is loaded first, so a folder that holds no model (no ``config.json``, an unknown
    ``model_type``) is reported as such rather than as a tokenizer failure.

    A local PEFT adapter folder (``adapter_config.json`` and no ``config.json``, what a trainer
    with a LoRA config saves) is loaded on ``base_model`` (default: the
    ``base_model_name_or_path`` its adapter config records) and attached with
    :func:`load_adapter` (merged into plain weights with ``merge_adapter=True``); the tokenizer
    comes from the adapter folder when one was saved there, else from the base model. Needs the
    ``peft`` extra."""
    tok_kwargs = {
        "trust_remote_code": kwargs.get("trust_remote_code", False),
        "revision": kwargs.get("revision"),
    }
    if is_adapter_dir(name_or_path):
        base = base_model or adapter_base_model(name_or_path)
        model = load_adapter(load_causal_lm(base, **kwargs), name_or_path, merge=merge_adapter)
        has_tok = (Path(name_or_path).expanduser() / "tokenizer_config.json").exists()
        tok = load_tokenizer(name_or_path if has_tok else base, **tok_kwargs)
        return model, tok
    if base_model is not None:
        raise ModelLoadError(
            f"base_model={os.fspath(base_model)!r} is only used for a PEFT adapter folder, and "
            f"{os.fspath(name_or_path)!r} is not one (no adapter_config.json)"
        )
    model = load_causal_lm(name_or_path, **kwargs)
    tok = load_tokenizer(name_or_path, **tok_kwargs)
    return model, tok


def is_adapter_dir(path: str | os.PathLike[str]) -> bool:
    """True for a local folder holding a PEFT adapter and no whole model."""
    p = Path(os.fspath(path)).expanduser()
    return (p / "adapter_config.json").is_file() and not (p / "config.json").exists()


def adapter_base_model(path: str | os.PathLike[str]) -> str:
    """The base model (hub id or path) a PEFT adapter folder records in its config."""
    import json

    cfg_path = Path(os.fspath(path)).expanduser() / "adapter_config.json"
    try:
        cfg = json.loads(cfg_path.read_text())
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"could not read the adapter config {str(cfg_path)!r}: {exc}") from exc
    base = cfg.get("base_model_name_or_path") if isinstance(cfg, dict) else None
    if not base:
        raise ModelLoadError(
            f"{str(cfg_path)!r} names no base model (base_model_name_or_path); pass base_model="
        )
    return str(base)


def load_adapter(
    model: PreTrainedModel, adapter: str | os.PathLike[str], *, merge: bool = False
) -> PreTrainedModel:
    """Attach the PEFT adapter saved at ``adapter`` (a local folder or a hub id) to ``model``,
    in eval mode; with ``merge=True`` merge it and return a plain transformers model (the
    adapter weights are loaded with safetensors, as peft does by default). Needs the ``peft``
    extra."""
    try:
        from peft import PeftModel
    except ImportError as exc:
        from llmcore.errors import MissingExtraError

        raise MissingExtraError("loading PEFT adapters", "peft") from exc
    name = os.fspath(adapter)
    try:
        out = PeftModel.from_pretrained(model, name)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise ModelLoadError(_explain(name, "PEFT adapter", exc)) from exc
    if merge:
        out = out.merge_and_unload()
    out.eval()
    return out


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of a model's first parameter (CPU for a model with none)."""
    import torch

    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _explain(name: str, what: str, exc: Exception) -> str:
    # keep the library's whole message (several lines): its first line alone can stop mid-sentence
    msg = " ".join(str(exc).split()) or type(exc).__name__
    if Path(name).exists():
        return f"could not load a {what} from local path {name!r}: {msg}"
    return (
        f"could not load {what} {name!r}: it is not a local path, and loading it as a hub id "
        f"failed ({msg}). Check the id, your network/HF_HUB_OFFLINE setting and access rights."
    )
