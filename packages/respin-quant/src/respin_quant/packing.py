"""Real low-bit storage of quantised weights: bit packing and the packed checkpoint file.

A fake-quantised linear holds weights already on its grid, ``w = code * scale`` with
integer codes in ``[-2^(b-1), 2^(b-1) - 1]`` and one scale per row (or per row and group).
:func:`pack_linear` recovers the codes, packs them ``b`` bits each into a byte stream and
verifies that unpacking reproduces the weight *bit for bit*; anything that does not round
trip exactly is stored unpacked instead (with a warning), so a packed checkpoint never changes
the function it stores.

Written by hand (about 60 lines): the libraries that pack INT4 (compressed-tensors,
optimum-quanto, AutoGPTQ) each fix one kernel layout and scale convention of their own, while
this only needs a lossless container for the codes our fake quantisers already produced, at
any width 2..8 (W3 included), readable back on CPU.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from respin_quant.errors import RotationError

log = logging.getLogger(__name__)

FORMAT = "respin-packed-v1"
PACKED_FILE = "respin_packed.safetensors"
_CHUNK = 1 << 22  # codes packed per step of the generic path (bounds temporary memory)


def pack_bits(codes: Tensor, bits: int) -> Tensor:
    """Pack unsigned ``codes`` (values in ``[0, 2^bits)``) into a flat uint8 tensor.

    Code ``i`` occupies bits ``i*bits .. i*bits+bits-1`` of the stream, least significant bit
    first; the result has ``ceil(numel * bits / 8)`` bytes."""
    if not 1 <= bits <= 8:
        raise ValueError(f"bits={bits}: packing supports 1..8 bits per code")
    flat = codes.reshape(-1).to(torch.uint8)
    if flat.numel() and int(flat.max()) >= 1 << bits:
        raise ValueError(f"a code does not fit in {bits} bits")
    if bits == 8:
        return flat.clone()
    if bits == 4:
        if flat.numel() % 2:
            flat = torch.cat([flat, flat.new_zeros(1)])
        return flat[0::2] | (flat[1::2] << 4)
    out = []
    shifts = torch.arange(bits, dtype=torch.uint8)
    weights = (1 << torch.arange(8, dtype=torch.int32)).to(torch.uint8)
    step = _CHUNK - _CHUNK % 8  # chunk boundaries fall on whole bytes of the stream
    for s in range(0, flat.numel(), step):
        planes = ((flat[s : s + step].unsqueeze(1) >> shifts) & 1).reshape(-1)
        if planes.numel() % 8:
            planes = torch.cat([planes, planes.new_zeros(8 - planes.numel() % 8)])
        out.append((planes.reshape(-1, 8) * weights).sum(dim=1, dtype=torch.int32).to(torch.uint8))
    return torch.cat(out) if out else flat.new_zeros(0)


def unpack_bits(packed: Tensor, bits: int, numel: int) -> Tensor:
    """Inverse of :func:`pack_bits`: the first ``numel`` codes as uint8."""
    if not 1 <= bits <= 8:
        raise ValueError(f"bits={bits}: packing supports 1..8 bits per code")
    need = (numel * bits + 7) // 8
    if packed.numel() < need:
        raise ValueError(f"packed stream has {packed.numel()} bytes, {need} needed")
    p = packed.reshape(-1).to(torch.uint8)
    if bits == 8:
        return p[:numel].clone()
    if bits == 4:
        return torch.stack([p & 0xF, p >> 4], dim=1).reshape(-1)[:numel]
    shifts = torch.arange(8, dtype=torch.uint8)
    weights = (1 << torch.arange(bits, dtype=torch.int32)).to(torch.uint8)
    out = []
    step = 8 * bits * (_CHUNK // (8 * bits))  # codes per chunk, a whole number of bytes
    for s in range(0, numel, step):
        n = min(step, numel - s)
        b0, b1 = s * bits // 8, (s * bits + n * bits + 7) // 8
        planes = ((p[b0:b1].unsqueeze(1) >> shifts) & 1).reshape(-1)[: n * bits]
        out.append((planes.reshape(n, bits) * weights).sum(dim=1, dtype=torch.int32))
    return torch.cat(out).to(torch.uint8) if out else p.new_zeros(0)


def _scale_storage(scale: Tensor, codes: Tensor, w: Tensor) -> Tensor | None:
    """The smallest float type (w's own 16-bit type, float32, float64) whose scales rebuild
    ``w`` exactly."""
    cands = [torch.float32, torch.float64]
    if w.dtype in (torch.float16, torch.bfloat16):
        cands.insert(0, w.dtype)
    for dt in cands:
        s = scale.to(dt)
        if torch.equal((codes.double() * s.double()).to(w.dtype), w):
            return s
    return None


def pack_linear(w: Tensor, scale: Tensor, bits: int) -> dict[str, Tensor] | None:
    """Codes and scales of a symmetric grid weight ``w`` [rows, cols] with ``scale``
    [rows, groups]; None when the weight is not exactly ``code * scale`` on that grid."""
    rows, cols = w.shape
    if scale.ndim == 1:
        scale = scale.unsqueeze(1)
    groups = scale.shape[-1]
    if scale.shape[0] != rows or cols % groups:
        return None
    wg = w.detach().reshape(rows, groups, cols // groups)
    sd = scale.detach().double().reshape(rows, groups, 1)
    qmax = 2 ** (bits - 1) - 1
    codes = torch.clamp(torch.round(wg.double() / sd), -qmax - 1, qmax)
    s = _scale_storage(sd, codes, wg)
    if s is None:
        return None
    return {
        "packed": pack_bits((codes + qmax + 1).to(torch.uint8), bits),
        "scale": s.reshape(rows, groups).contiguous(),
    }


def unpack_linear(
    packed: Tensor, scale: Tensor, bits: int, shape: tuple[int, int], dtype: torch.dtype
) -> Tensor:
    """The weight stored by :func:`pack_linear`, bit-identical to the one packed."""
    rows, cols = shape
    qmax = 2 ** (bits - 1) - 1
    codes = unpack_bits(packed, bits, rows * cols).double() - (qmax + 1)
    groups = scale.shape[-1]
    w = codes.reshape(rows, groups, cols // groups) * scale.double().reshape(rows, groups, 1)
    return w.reshape(rows, cols).to(dtype)


_DTYPES = {str(d): d for d in (torch.float16, torch.bfloat16, torch.float32, torch.float64)}


def save_packed_state(
    state: dict[str, Tensor], scales: dict[str, Tensor], bits: int, path: str | Path
) -> dict[str, int]:
    """Write ``state`` to ``path``, packing every ``<name>.weight`` that has a scale in
    ``scales`` (keyed by the module name). Returns byte counts (packed / kept as floats)."""
    from safetensors.torch import save_file

    out: dict[str, Tensor] = {}
    meta: dict[str, Any] = {}
    n_packed = n_float = 0
    for key, t in state.items():
        name = key[: -len(".weight")] if key.endswith(".weight") else None
        entry = None
        if name is not None and name in scales:
            entry = pack_linear(t, scales[name], bits)
            if entry is None:
                log.warning("%s is not exactly code * scale on its grid: stored unpacked", key)
        if entry is None:
            out[key] = t.detach().contiguous()
            n_float += t.numel() * t.element_size()
            continue
        out[f"{key}.packed"], out[f"{key}.scale"] = entry["packed"], entry["scale"]
        meta[key] = {"shape": list(t.shape), "dtype": str(t.dtype)}
        n_packed += entry["packed"].numel() + entry["scale"].numel() * entry["scale"].element_size()
    header = {"format": FORMAT, "bits": str(bits), "packed": json.dumps(meta)}
    save_file(out, str(path), metadata=header)
    return {"packed_bytes": n_packed, "float_bytes": n_float, "packed_tensors": len(meta)}


def load_packed_state(path: str | Path) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """Read a :func:`save_packed_state` file: (state dict with dequantised weights, scales)."""
    from safetensors import safe_open

    state: dict[str, Tensor] = {}
    scales: dict[str, Tensor] = {}
    with safe_open(str(path), framework="pt") as f:
        header = f.metadata() or {}
        if header.get("format") != FORMAT:
            raise RotationError(f"{path}: not a {FORMAT} file (format {header.get('format')!r})")
        bits = int(header["bits"])
        meta = json.loads(header["packed"])
        keys = set(f.keys())
        for key, m in meta.items():
            if f"{key}.packed" not in keys or f"{key}.scale" not in keys:
                raise RotationError(f"{path}: {key} is listed as packed but its data is missing")
            sc = f.get_tensor(f"{key}.scale")
            shape = (int(m["shape"][0]), int(m["shape"][1]))
            state[key] = unpack_linear(
                f.get_tensor(f"{key}.packed"), sc, bits, shape, _DTYPES[m["dtype"]]
            )
            scales[key[: -len(".weight")]] = sc
        for key in keys:
            if key.endswith((".packed", ".scale")) and key.rsplit(".", 1)[0] in meta:
                continue
            state[key] = f.get_tensor(key)
    return state, scales
