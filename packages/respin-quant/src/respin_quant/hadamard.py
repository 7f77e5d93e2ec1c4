"""Hadamard and random orthogonal matrices (QuaRot's R, SpinQuant's initialisation).

``hadamard_transform`` is the normalised fast Walsh-Hadamard transform along the last dim
(x -> x H_n with H_n = Sylvester Hadamard / sqrt(n), symmetric and orthogonal).
"""

from __future__ import annotations

import logging
import math

import torch
from torch import Tensor

from respin_quant.errors import RespinConfigError

log = logging.getLogger(__name__)


def is_pow2(n: int) -> bool:
    return n >= 1 and (n & (n - 1)) == 0


def hadamard_transform(x: Tensor) -> Tensor:
    """Orthonormal fast Walsh-Hadamard transform of the last dimension (size a power of two)."""
    n = x.shape[-1]
    if not is_pow2(n):
        raise RespinConfigError(
            f"the fast Hadamard transform needs a power-of-two size, got {n}: "
            "use block_hadamard_transform or online_dense=True"
        )
    if n <= _MATMUL_MAX:
        return x @ _cached_matrix(n, x.dtype, x.device)
    return _wht(x)


_MATMUL_MAX = 1024
_CACHE: dict[tuple[int, torch.dtype, str], Tensor] = {}


def _cached_matrix(n: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    key = (n, dtype, str(device))
    if key not in _CACHE:
        _CACHE[key] = _wht(torch.eye(n, dtype=torch.float64)).to(dtype=dtype, device=device)
    return _CACHE[key]


def _wht(x: Tensor) -> Tensor:
    n = x.shape[-1]
    shape = x.shape
    y = x.reshape(-1, n)
    h = 1
    while h < n:
        y = y.reshape(-1, n // (2 * h), 2, h)
        a, b = y[:, :, 0, :], y[:, :, 1, :]
        y = torch.stack((a + b, a - b), dim=2)
        h *= 2
    return (y.reshape(shape) / math.sqrt(n)).to(x.dtype)


def largest_pow2_block(n: int) -> int:
    """Largest power of two dividing ``n``."""
    return n & (-n)


def block_hadamard_transform(x: Tensor, block: int) -> Tensor:
    """x -> x (I_{n/block} kron H_block): orthonormal WHT on consecutive blocks of the last dim."""
    n = x.shape[-1]
    if n % block or not is_pow2(block):
        raise RespinConfigError(f"block {block} must be a power of two dividing {n}")
    return hadamard_transform(x.reshape(*x.shape[:-1], n // block, block)).reshape(x.shape)


def hadamard_matrix(n: int, dtype: torch.dtype = torch.float64) -> Tensor:
    """Normalised Sylvester Hadamard matrix H_n (n a power of two)."""
    return _wht(torch.eye(n, dtype=torch.float64)).to(dtype)


def random_orthogonal(
    n: int, generator: torch.Generator, dtype: torch.dtype = torch.float64
) -> Tensor:
    """Haar-random orthogonal matrix (QR of a Gaussian with the sign fix)."""
    a = torch.randn(n, n, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(a)
    q = q * torch.sign(torch.diagonal(r)).unsqueeze(0)
    return q.to(dtype)


def random_hadamard(
    n: int, generator: torch.Generator, dtype: torch.dtype = torch.float64
) -> Tensor:
    """QuaRot's random Hadamard diag(s) H_n with i.i.d. random signs s.

    For a size that is not a power of two this falls back to a seeded random orthogonal
    matrix with a warning (only valid for mergeable slots).
    """
    if not is_pow2(n):
        log.warning("size %d is not a power of two: using a seeded random orthogonal matrix", n)
        return random_orthogonal(n, generator, dtype)
    s = torch.randint(0, 2, (n,), generator=generator).to(torch.float64) * 2 - 1
    return (s.unsqueeze(1) * hadamard_matrix(n)).to(dtype)


class OnlineHadamard:
    """Fixed online rotation u -> u H for a size ``n`` (SpinQuant's R3/R4).

    Power of two: full fast WHT. Otherwise an error, unless ``dense`` (a
    seeded random orthogonal n x n matrix) or ``block`` (WHT on the largest power-of-two block
    dividing n; a package option, not QuaRot's Kronecker construction) is asked for.
    """

    def __init__(
        self,
        n: int,
        *,
        dense: bool = False,
        block: bool = False,
        seed: int = 0,
        what: str = "online rotation",
    ):
        self.n = n
        self.matrix: Tensor | None = None
        self.block = n
        if dense:
            self.mode = "dense"
            self.matrix = random_orthogonal(n, torch.Generator().manual_seed(seed))
        elif is_pow2(n):
            self.mode = "wht"
        else:
            b = largest_pow2_block(n)
            if not block or b < 2:
                hint = (
                    f"online_block=True (Hadamard blocks of {b}), " if b >= 2 and not block else ""
                )
                raise RespinConfigError(
                    f"{what}: size {n} is not a power of two, so it has no fast Hadamard "
                    f"transform; pass {hint}online_dense=True (a dense random orthogonal "
                    f"{n}x{n} rotation, {n * n:,} MACs per token) or disable it"
                )
            log.warning("%s: size %d is not a power of two, using block Hadamard of %d", what, n, b)
            self.mode, self.block = "block", b

    def __call__(self, x: Tensor) -> Tensor:
        if self.mode == "wht":
            return hadamard_transform(x)
        if self.mode == "block":
            return block_hadamard_transform(x, self.block)
        assert self.matrix is not None
        return x @ self.matrix.to(device=x.device, dtype=x.dtype)

    def describe(self) -> dict[str, int | str]:
        return {"mode": self.mode, "n": self.n, "block": self.block}
