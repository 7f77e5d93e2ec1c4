"""Checkpoints without pickle: tensors in a safetensors file, everything else as JSON in its header.

A resumable training state (model and optimizer state dicts, the data generator's RNG state, PAFT's
schedule and an in-flight sync, the injector's step counter) is a tree of dicts, lists, tuples,
numbers, strings and tensors. `save_checkpoint` stores every tensor under a generated key in one
``.safetensors`` file and the rest of the tree as JSON in that file's metadata, with a SHA-256 of
all tensor bytes, so one atomic ``os.replace`` publishes both and loading never unpickles anything:
a file that is not a well-formed checkpoint written by this module (a pickle dropped in its place,
a truncated or garbled file) raises :class:`~paft_dist.errors.CheckpointError` and executes no code.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from paft_dist.errors import CheckpointError

FORMAT = "paft-dist-checkpoint/1"
SUFFIX = ".safetensors"
_TENSOR, _TUPLE, _ITEMS = "__tensor__", "__tuple__", "__items__"
_RESERVED = (_TENSOR, _TUPLE, _ITEMS)


def _encode(obj: Any, tensors: dict[str, Any], where: str) -> Any:
    import torch

    if isinstance(obj, torch.Tensor):
        key = f"t{len(tensors)}"
        tensors[key] = obj.detach().to("cpu", copy=True).contiguous()
        return {_TENSOR: key}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, tuple):
        return {_TUPLE: [_encode(v, tensors, f"{where}[{i}]") for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_encode(v, tensors, f"{where}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        if all(isinstance(k, str) and k not in _RESERVED for k in obj):
            return {k: _encode(v, tensors, f"{where}.{k}") for k, v in obj.items()}
        return {
            _ITEMS: [
                [_encode(k, tensors, f"{where}<key>"), _encode(v, tensors, f"{where}[{k!r}]")]
                for k, v in obj.items()
            ]
        }
    raise CheckpointError(
        f"cannot store {type(obj).__name__} at {where or 'the root'} in a checkpoint: only "
        "tensors, dicts, lists, tuples, numbers, strings and None are saved (no pickle)"
    )


def _decode(obj: Any, tensors: dict[str, Any]) -> Any:
    if isinstance(obj, list):
        return [_decode(v, tensors) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if _TENSOR in obj:
        key = obj[_TENSOR]
        if key not in tensors:
            raise CheckpointError(f"checkpoint metadata names a missing tensor {key!r}")
        return tensors[key]
    if _TUPLE in obj:
        return tuple(_decode(v, tensors) for v in obj[_TUPLE])
    if _ITEMS in obj:
        return {_decode(k, tensors): _decode(v, tensors) for k, v in obj[_ITEMS]}
    return {k: _decode(v, tensors) for k, v in obj.items()}


def _digest(tensors: dict[str, Any]) -> str:
    import torch

    h = hashlib.sha256()
    for key in sorted(tensors):
        t = tensors[key]
        h.update(f"{key}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def checkpoint_path(path: str | Path) -> Path:
    """The file a checkpoint named ``path`` lives in (``.safetensors`` appended if missing)."""
    p = Path(path)
    return p if p.suffix == SUFFIX else p.with_name(p.name + SUFFIX)


def save_checkpoint(state: dict[str, Any], path: str | Path) -> Path:
    """Write ``state`` atomically to ``path`` (a ``.safetensors`` file); returns the file.

    Raises CheckpointError for a value that is neither a tensor nor JSON-like (nothing is pickled).
    """
    from safetensors.torch import save_file

    if not isinstance(state, dict):
        raise CheckpointError(f"a checkpoint is a dict, got {type(state).__name__}")
    tensors: dict[str, Any] = {}
    tree = _encode(state, tensors, "")
    meta = {
        "format": FORMAT,
        "tree": json.dumps(tree, allow_nan=True),
        "sha256": _digest(tensors),
    }
    target = checkpoint_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    save_file(tensors, str(tmp), metadata=meta)
    os.replace(tmp, target)
    return target


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint`; tensors come back on the CPU.

    Never unpickles: a file that is not such a checkpoint (wrong format, truncated, payload that
    does not match its recorded SHA-256) raises CheckpointError naming the file.
    """
    from safetensors import safe_open

    target = checkpoint_path(path)
    if not target.is_file():
        raise CheckpointError(f"no checkpoint at {target}")
    what = f"{target} is not a valid paft-dist checkpoint"
    try:
        with safe_open(str(target), framework="pt", device="cpu") as f:
            meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (not a dict)
    except CheckpointError:
        raise
    except Exception as e:  # safetensors raises its own error types for malformed files
        raise CheckpointError(
            f"{what} (unreadable safetensors file: {e}); delete it to start over"
        ) from None
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{what} (format {meta.get('format')!r}, expected {FORMAT!r})")
    if meta.get("sha256") != _digest(tensors):
        raise CheckpointError(f"{what}: its tensor bytes do not match the recorded SHA-256")
    try:
        tree = json.loads(meta["tree"])
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{what} (metadata is not valid JSON: {e})") from None
    try:
        state = _decode(tree, tensors)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{what} (malformed metadata: {e})") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{what} (its root is not a dict)")
    return state
