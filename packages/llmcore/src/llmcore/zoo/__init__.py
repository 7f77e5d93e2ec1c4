"""The tiny-model zoo: deterministic recipes that build, train, gate and cache small models.

>>> from llmcore import zoo
>>> entry = zoo.build("tiny-llama")          # trains once per machine, then loads from cache
>>> model, tok = entry.load()                # the same from_pretrained path a hub model uses

Every entry is a ``save_pretrained`` directory keyed by a hash of the recipe (corpus,
tokenizer, architecture, training, gate) and the torch/transformers/tokenizers versions.
A build that misses its recipe's quality gate raises :class:`~llmcore.errors.QualityGateError`
and caches nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llmcore.errors import ConfigError, QualityGateError
from llmcore.zoo.cache import cache_root, clear, list_entries, pin_reference_kernels
from llmcore.zoo.corpus import Corpus, arithmetic_corpus, default_corpus, dyck_corpus, facts_corpus
from llmcore.zoo.recipes import ModelSpec, Recipe, TokenizerSpec, TrainSpec
from llmcore.zoo.store import ZooEntry, artifact_dir, cached, code_digest, lookup
from llmcore.zoo.tokenizer import corpus_symbols, train_bpe_tokenizer, word_tokenizer
from llmcore.zoo.train import accuracy_gate

__all__ = [
    "Corpus",
    "ModelSpec",
    "Recipe",
    "TokenizerSpec",
    "TrainSpec",
    "ZooEntry",
    "accuracy_gate",
    "arithmetic_corpus",
    "artifact_dir",
    "build",
    "cache_root",
    "cached",
    "clear",
    "code_digest",
    "default_corpus",
    "dyck_corpus",
    "facts_corpus",
    "get_recipe",
    "list_entries",
    "lookup",
    "pin_reference_kernels",
    "recipe_names",
    "recipe_tokenizer",
    "register_recipe",
    "train_bpe_tokenizer",
    "word_tokenizer",
]

log = logging.getLogger(__name__)

_RECIPES: dict[str, Callable[[], Recipe]] = {}


def register_recipe(name: str, factory: Callable[[], Recipe], *, replace: bool = False) -> None:
    """Register a named recipe factory (lazy: the corpus is only built when asked for)."""
    if name in _RECIPES and not replace:
        raise ConfigError(f"a zoo recipe named {name!r} is already registered")
    _RECIPES[name] = factory


def recipe_names() -> list[str]:
    """Names of the registered recipes."""
    return sorted(_RECIPES)


def get_recipe(name: str) -> Recipe:
    """The registered recipe ``name`` (ConfigError listing the known names otherwise)."""
    try:
        return _RECIPES[name]()
    except KeyError:
        raise ConfigError(
            f"unknown zoo recipe {name!r}; known: {', '.join(recipe_names())}"
        ) from None


def build(
    recipe: Recipe | str,
    *,
    force: bool = False,
    progress: bool = True,
    loss_fn: Callable[..., Any] | None = None,
    gate: Callable[[Any, Any], dict[str, float]] | None = None,
    model_fn: Callable[..., Any] | None = None,
    key_extra: dict[str, Any] | None = None,
) -> ZooEntry:
    """Build ``recipe`` (or a registered name) unless a cache entry for it exists; return it.

    Cold builds train the tokenizer and the model, check the quality gate (raising
    :class:`QualityGateError` on a miss, caching nothing) and install the directory atomically
    under :func:`cache_root` (through :func:`cached`). Concurrent builds of one recipe wait on a
    file lock.

    Method packages customise a build without copying this flow: ``loss_fn(model, input_ids,
    attention_mask, generator)`` replaces the objective's loss (e.g. :func:`train.completion_loss`
    or layer dropout); ``gate(model, tokenizer) -> metrics`` runs after the held-out-loss gate
    (e.g. :func:`accuracy_gate`), its metrics are recorded, and it raises
    :class:`QualityGateError` to reject the model; ``model_fn(spec, tokenizer, seed=)`` builds a
    patched architecture instead of :func:`train.build_model`. ``key_extra`` (JSON-serialisable)
    says what those callables do and joins the cache key; it is required with any of them
    (e.g. ``{"loss": "completion-only", "code": code_digest(my_module)}``)."""
    if isinstance(recipe, str):
        recipe = get_recipe(recipe)
    if (loss_fn is not None or gate is not None or model_fn is not None) and not key_extra:
        raise ConfigError(
            "build() with a custom loss_fn, gate or model_fn needs key_extra describing them "
            "(e.g. {'loss': 'layer-drop-0.2', 'code': zoo.code_digest(my_module)}): the cache "
            "key must change when they do"
        )
    material = recipe.key_material()
    if key_extra:
        material["extra"] = key_extra
    load_kwargs = {}
    if recipe.model.attn_implementation is not None:
        load_kwargs["attn_implementation"] = recipe.model.attn_implementation

    def make(tmp: Path) -> dict[str, Any]:
        return _train_into(recipe, tmp, progress, loss_fn, gate, model_fn)

    return cached(
        recipe.name,
        material,
        make,
        force=force,
        progress=False,
        description=recipe.description,
        load_kwargs=load_kwargs,
    )


def recipe_tokenizer(recipe: Recipe):
    """The tokenizer a recipe's build trains (BPE) or defines (word)."""
    spec = recipe.tokenizer
    if spec.kind == "word":
        symbols = spec.symbols or tuple(corpus_symbols(recipe.corpus.train))
        return word_tokenizer(symbols, extra_special_tokens=spec.extra_special_tokens)
    return train_bpe_tokenizer(
        recipe.corpus.train,
        spec.vocab_size,
        min_frequency=spec.min_frequency,
        extra_special_tokens=spec.extra_special_tokens,
    )


def _train_into(
    recipe: Recipe, out: Path, progress: bool, loss_fn=None, gate=None, model_fn=None
) -> dict[str, Any]:
    from llmcore.zoo.train import build_model, eval_loss, train_lm

    tok = recipe_tokenizer(recipe)
    model = (model_fn or build_model)(recipe.model, tok, seed=recipe.train.seed)
    if recipe.train.objective == "masked_diffusion":
        model.config.llmcore_objective = "masked_diffusion"
        model.config.mask_token_id = tok.mask_token_id
    stats = train_lm(
        model,
        tok,
        recipe.corpus.train,
        recipe.train,
        loss_fn=loss_fn,
        progress=progress,
        desc=recipe.name,
    )
    held = eval_loss(
        model,
        tok,
        recipe.corpus.eval,
        objective=recipe.train.objective,
        max_length=recipe.train.max_length,
    )
    metrics = {
        **stats,
        "eval_loss": held,
        "n_params": float(sum(p.numel() for p in model.parameters())),
    }
    if not held <= recipe.max_eval_loss:
        raise QualityGateError(
            f"zoo recipe {recipe.name!r} missed its quality gate: held-out loss {held:.4f} > "
            f"{recipe.max_eval_loss} after {recipe.train.steps} steps (first loss "
            f"{stats['first_loss']:.3f}). Train longer or fix the recipe; nothing was cached."
        )
    if gate is not None:
        metrics.update(gate(model, tok))
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    metrics["weights_sha256"] = weights_digest(model)
    metrics["threads"] = recipe.train.threads
    return metrics


def weights_digest(model) -> str:
    """sha256 over every tensor of ``model.state_dict()`` (names, dtypes, shapes and bytes)."""
    import hashlib

    import torch

    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------
# Built-in recipes. Gates were calibrated on a 2-core machine (see the llmcore README).


def _tiny_llama() -> Recipe:
    return Recipe(
        "tiny-llama",
        default_corpus(seed=0),
        model=ModelSpec(arch="llama"),
        max_eval_loss=1.0,
        description="Llama, ~1M params, on worked arithmetic + fictitious facts + Dyck-2",
    )


def _tiny_qwen2() -> Recipe:
    return Recipe(
        "tiny-qwen2",
        default_corpus(seed=0),
        model=ModelSpec(arch="qwen2", num_kv_heads=2),
        max_eval_loss=1.0,
        description="Qwen2 (GQA, qkv bias), ~1M params, same corpus as tiny-llama",
    )


def _tiny_mdlm() -> Recipe:
    return Recipe(
        "tiny-mdlm",
        default_corpus(seed=0),
        model=ModelSpec(arch="llama"),
        train=TrainSpec(objective="masked_diffusion", steps=1500),
        max_eval_loss=2.5,
        description="LLaDA-style masked diffusion LM (bidirectional Llama), ~1M params",
    )


register_recipe("tiny-llama", _tiny_llama)
register_recipe("tiny-qwen2", _tiny_qwen2)
register_recipe("tiny-mdlm", _tiny_mdlm)
