import logging

import pytest
import torch
from respin_quant.errors import RespinConfigError
from respin_quant.hadamard import (
    OnlineHadamard,
    block_hadamard_transform,
    hadamard_matrix,
    hadamard_transform,
    random_hadamard,
)


@pytest.mark.parametrize("n", [1, 2, 8, 64, 2048])
def test_hadamard_orthogonal_and_transform_matches(n):
    H = hadamard_matrix(n)
    assert torch.allclose(H.T @ H, torch.eye(n, dtype=torch.float64), atol=1e-12)
    x = torch.randn(3, n, dtype=torch.float64)
    assert torch.allclose(hadamard_transform(x), x @ H, atol=1e-10)


def test_random_hadamard_orthogonal_and_seeded():
    a = random_hadamard(128, torch.Generator().manual_seed(3))
    b = random_hadamard(128, torch.Generator().manual_seed(3))
    assert torch.equal(a, b)
    assert torch.allclose(a.T @ a, torch.eye(128, dtype=torch.float64), atol=1e-12)
    assert set(a.abs().unique().tolist()) == {1 / 128**0.5} or torch.allclose(
        a.abs(), torch.full_like(a, 128**-0.5)
    )


def test_non_power_of_two_fallbacks(caplog):
    with caplog.at_level(logging.WARNING):
        r = random_hadamard(12, torch.Generator().manual_seed(0))
    assert "not a power of two" in caplog.text
    assert torch.allclose(r.T @ r, torch.eye(12, dtype=torch.float64), atol=1e-12)
    with pytest.raises(RespinConfigError, match="power-of-two"):
        hadamard_transform(torch.randn(2, 12))
    with pytest.raises(RespinConfigError, match=r"online_block=True .*online_dense=True"):
        OnlineHadamard(48)  # a clear error by default
    oh = OnlineHadamard(48, block=True)  # 48 = 3 * 16 -> block Hadamard of 16
    assert oh.mode == "block" and oh.block == 16
    x = torch.randn(2, 48, dtype=torch.float64)
    assert torch.allclose(oh(x).norm(), x.norm())
    assert torch.allclose(block_hadamard_transform(x, 16), oh(x))
    with pytest.raises(RespinConfigError, match="online_dense"):
        OnlineHadamard(45)
    d = OnlineHadamard(45, dense=True)
    assert torch.allclose(d(x[:, :45]).norm(), x[:, :45].norm())
