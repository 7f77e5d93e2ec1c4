"""Second-moment statistics ``C_0 = E[k k^T]`` of a module's inputs (MEMIT eq. 14's ``C_0``,
ROME's ``C``), computed once per (model weights, dtype, module, sample count, texts) and cached as
safetensors under ``llmcore.zoo.artifact_dir('edit-collapse')/stats``."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from edit_collapse.errors import StaleStatsError


def stats_key(
    model_digest: str, module: str, dtype: str, n_samples: int, texts: Sequence[str]
) -> dict[str, str]:
    th = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:16]
    return {"model_sha256": model_digest, "module": module, "dtype": dtype,
            "n_samples": str(n_samples), "texts_sha256": th}  # fmt: skip


def _cache_dir(cache_dir: str | Path | None) -> Path:
    if cache_dir:
        return Path(cache_dir)
    from llmcore.zoo import artifact_dir

    return artifact_dir("edit-collapse") / "stats"


def stats_path(key: dict[str, str], cache_dir: str | Path | None = None) -> Path:
    # "v2": files written before every layer's statistics were taken from the unedited weights
    # (a later layer's could include the first layer's update) are not reused.
    name = f"v2-{key['model_sha256'][:16]}-{key['module']}-{key['dtype']}-{key['n_samples']}-{key['texts_sha256']}"
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
                "recompute them for this model/dtype/layer"
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
    the model's weight digest, dtype, module, sample count and texts."""
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
