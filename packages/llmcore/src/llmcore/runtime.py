"""Seeding, device/dtype selection, thread count and logging setup."""

from __future__ import annotations

import contextlib
import logging
import os
import random
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from llmcore.errors import ConfigError

if TYPE_CHECKING:
    import torch

_DTYPES = {
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float64": "float64",
    "fp64": "float64",
}


def set_seed(seed: int, *, deterministic: bool = False) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA). ``deterministic`` also asks torch for
    deterministic kernels (``torch.use_deterministic_algorithms(True, warn_only=True)``)."""
    import numpy as np
    import torch

    if not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)


def select_device(device: str | None = None) -> torch.device:
    """Resolve ``device``: ``None``/``"auto"`` picks CUDA, then MPS, then CPU; an explicit device
    that is not available raises :class:`ConfigError`."""
    import torch

    if device is None or device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ConfigError(f"invalid device {device!r}: {exc}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} requested but CUDA is not available; use 'cpu'")
    return dev


def select_dtype(dtype: Any = None, device: Any = None) -> torch.dtype:
    """Resolve ``dtype`` (a ``torch.dtype`` or a name such as ``"bf16"``). ``None``/``"auto"``
    gives bfloat16 on CUDA devices that support it and float32 elsewhere."""
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype is None or dtype == "auto":
        dev = torch.device(device) if device is not None else torch.device("cpu")
        if dev.type == "cuda" and torch.cuda.is_available() and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    name = _DTYPES.get(str(dtype).lower().removeprefix("torch."))
    if name is None:
        raise ConfigError(
            f"unknown dtype {dtype!r}; use one of {sorted(set(_DTYPES))} or a torch.dtype"
        )
    return getattr(torch, name)


@contextlib.contextmanager
def num_threads(n: int | None) -> Iterator[None]:
    """Temporarily set torch's intra-op thread count (``None`` leaves it unchanged).

    Tiny models train several times faster with one thread than with two on 2-core machines,
    so the zoo trains with ``n=1`` unless told otherwise."""
    import torch

    if n is None:
        yield
        return
    if n < 1:
        raise ConfigError(f"thread count must be >= 1, got {n}")
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def setup_logging(level: int | str | None = None) -> None:
    """Configure the ``llmcore`` (and root) logger once; level from ``LLMCORE_LOG_LEVEL``
    (default INFO)."""
    level = level or os.environ.get("LLMCORE_LOG_LEVEL", "INFO")
    logging.basicConfig(
        level=level if isinstance(level, int) else str(level).upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
