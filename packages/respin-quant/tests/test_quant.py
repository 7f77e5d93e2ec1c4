import pytest
import torch
from respin_quant.config import QuantConfig
from respin_quant.errors import RespinConfigError
from respin_quant.hadamard import hadamard_transform
from respin_quant.quant import (
    gptq_quantize_weight,
    packed_weight_bytes,
    quantize_asym,
    rtn_quantize_weight,
)


def test_rtn_4bit_hand_values():
    w = torch.tensor([[1.0, -0.55, 0.25, 0.1], [0.0, 0.0, 0.0, 0.0]])
    q = rtn_quantize_weight(w, 4, clip="none")
    # scale = 1/7; w/scale = 7, -3.85, 1.75, 0.7 -> 7, -4, 2, 1
    assert torch.allclose(q[0], torch.tensor([7.0, -4.0, 2.0, 1.0]) / 7)
    assert torch.equal(q[1], torch.zeros(4))


def test_rtn_mse_clip_not_worse_than_no_clip():
    w = torch.randn(64, 128, generator=torch.Generator().manual_seed(0))
    w[:, 0] *= 8
    e_clip = (rtn_quantize_weight(w, 3) - w).abs().pow(2.4).sum()
    e_none = (rtn_quantize_weight(w, 3, clip="none") - w).abs().pow(2.4).sum()
    assert e_clip <= e_none


def test_group_size_must_divide():
    with pytest.raises(RespinConfigError, match="does not divide"):
        rtn_quantize_weight(torch.randn(4, 10), 4, 3)


def test_per_token_outlier_zeroes_small_entries_and_hadamard_helps():
    x = torch.full((1, 64), 0.01)
    x[0, ::2] = -0.01
    x[0, 3] = 100.0
    q = quantize_asym(x, 4)
    small = torch.ones(64, dtype=torch.bool)
    small[3] = False
    assert torch.all(q[0, small] == 0)  # every small entry collapses to zero
    y = hadamard_transform(x)
    ratio = lambda t: float(t.abs().max() / t.pow(2).mean().sqrt())  # noqa: E731
    assert ratio(y) < ratio(x) / 4


def test_gptq_beats_rtn_on_output_error():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(512, 64, generator=g) @ torch.randn(64, 64, generator=g)
    W = torch.randn(32, 64, generator=g)
    H = X.T @ X / X.shape[0]
    qg = gptq_quantize_weight(W, H, 3, blocksize=16)
    qr = rtn_quantize_weight(W, 3)
    assert ((X @ (qg - W).T).norm()) < ((X @ (qr - W).T).norm())
    # still on a per-row symmetric 3-bit grid: at most 8 distinct values per row
    assert all(len(torch.unique(row)) <= 8 for row in qg)
    qgg = gptq_quantize_weight(W, H, 4, groupsize=16, blocksize=16)
    assert ((X @ (qgg - W).T).norm()) < ((X @ (W - W.round()).T).norm())


def test_packed_bytes_ratio():
    fp16 = 4096 * 4096 * 2
    assert packed_weight_bytes(4096, 4096, 4) / fp16 <= 0.3


@pytest.mark.parametrize(
    "kw",
    [
        dict(w_bits=1),
        dict(a_bits=17),
        dict(k_bits=0),
        dict(a_clip_ratio=0.0),
        dict(a_clip_ratio=1.2),
        dict(w_groupsize=0),
        dict(weight_quantizer="awq"),
    ],
)
def test_quant_config_rejects(kw):
    with pytest.raises(ValueError):
        QuantConfig(**kw)
