"""Second-moment statistics ``C_0 = E[k k^T]`` of a module's inputs (MEMIT eq. 14's ``C_0``,
ROME's ``C``), computed once per (model weights, dtype, module, sample count, texts, code) and
cached as safetensors under ``llmcore.zoo.artifact_dir('edit-collapse')/stats``."""

from __future__ import annotations

import hashlib
import inspect
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from edit_collapse.errors import StaleStatsError

STATS_HELPERS = ("encode", "pad_right", "pad_id", "device_of")
"""The :mod:`edit_collapse.core` functions :func:`layer_stats` calls (tokenisation with the BOS
rule, padding): their source joins the statistics' code digest."""


def stats_code_digest() -> str:
    """sha256 (16 hex digits) of the code that computes ``C_0``: this module
    (``llmcore.zoo.code_digest``), the :mod:`edit_collapse.core` helpers it calls
    (:data:`STATS_HELPERS`) and ``llmcore.hooks.capture_activations``, which records the keys.
    It is part of every statistics key and file name, so statistics computed by other code are
    never reused. The rest of ``core`` (v*/z*, key capture of the edits) is left out on purpose:
    a change there must not force recomputing ``C_0``, which on a real model costs hours."""
    from edit_collapse import core
    from llmcore import hooks
    from llmcore.zoo import code_digest

    h = hashlib.sha256(code_digest(sys.modules[__name__]).encode())
    for fn in (*(getattr(core, n) for n in STATS_HELPERS), hooks.capture_activations):
        h.update(inspect.getsource(fn).encode())
    return h.hexdigest()[:16]


def stats_key(
    model_digest: str, module: str, dtype: str, n_samples: int, texts: Sequence[str]
) -> dict[str, str]:
    """What determines the statistics: the weights' sha256, module, dtype, sample count, texts
    and the code that computes them (:func:`stats_code_digest`)."""
    th = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:16]
    return {"model_sha256": model_digest, "module": module, "dtype": dtype,
            "n_samples": str(n_samples), "texts_sha256": th, "code": stats_code_digest()}  # fmt: skip


def _cache_dir(cache_dir: str | Path | None) -> Path:
    if cache_dir:
        return Path(cache_dir)
    from llmcore.zoo import artifact_dir

    return artifact_dir("edit-collapse") / "stats"


def stats_path(key: dict[str, str], cache_dir: str | Path | None = None) -> Path:
    """The file of ``key``; the name starts with the code digest, so a change to how ``C_0`` is
    computed never finds an older file."""
    name = f"{key['code']}-{key['model_sha256'][:16]}-{key['module']}-{key['dtype']}-{key['n_samples']}-{key['texts_sha256']}"
    return _cache_dir(cache_dir) / f"{name}.safetensors"


def load_stats(path: str | Path, key: dict[str, str]) -> torch.Tensor:
    """Load cached statistics, refusing a file whose recorded key differs from ``key``."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
        diff = {k: (meta.get(k), v) for k, v in key.items() if meta.get(k) != v}
        if diff:
            raise StaleStatsError(
                f"statistics {str(path)!r} were computed for another setting "
                f"({ {k: f'{a} != {b}' for k, (a, b) in diff.items()} }); delete the file or "
                "recompute them for this model/dtype/layer (a different 'code' means they were "
                "computed by another version of the statistics code)"
            )
        return f.get_tensor("mom2")


@torch.no_grad()
def layer_stats(
    model: Any,
    tok: Any,
    module: str,
    texts: Sequence[str],
    n_samples: int = 2000,
    cache_dir: str | Path | None = None,
    dtype: str = "float32",
    model_digest: str | None = None,
    batch_size: int = 32,
) -> torch.Tensor:
    """``E[k k^T]`` over every non-pad token input of ``module`` on the first ``n_samples``
    texts (as ROME/MEMIT count ``mom2_n_samples``), ``[d_in, d_in]`` float32 on CPU, cached by
    the model's weight digest, dtype, module, sample count, texts and the statistics code
    (:func:`stats_code_digest`)."""
    from safetensors.torch import save_file

    from edit_collapse.core import device_of, encode, pad_id, pad_right
    from llmcore.hooks import capture_activations
    from llmcore.zoo import weights_digest

    digest = model_digest or weights_digest(model)
    texts = list(texts)[:n_samples]
    key = stats_key(digest, module, dtype, n_samples, texts)
    path = stats_path(key, cache_dir)
    if path.is_file():
        return load_stats(path, key)
    acc, count = None, 0
    dt = getattr(torch, dtype)
    for s in range(0, len(texts), batch_size):
        rows = [encode(tok, t) for t in texts[s : s + batch_size]]
        ids, att = pad_right(rows, pad_id(tok), device_of(model))
        with capture_activations(model, [module], input=True) as acts:
            model(input_ids=ids, attention_mask=att)
        k = acts[module][0][att.bool()].to(dt)
        acc = k.T @ k if acc is None else acc + k.T @ k
        count += k.shape[0]
    if acc is None or count == 0:
        raise StaleStatsError(f"no tokens to compute statistics of {module!r} from")
    mom2 = (acc / count).float().cpu().contiguous()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    save_file(
        {"mom2": mom2}, str(tmp), metadata={**key, "count": str(count), "json": json.dumps(key)}
    )
    tmp.replace(path)
    return mom2
