"""KL-margin cost and the DIMR-style mask search."""

from __future__ import annotations

import pytest
import torch
from conftest import encode
from via_sd import dimr_search, kl_margin_cost, layer_mask_even, layer_mask_random
from via_sd.errors import ViaSDConfigError
from via_sd.mask_search import mask_cost
from via_sd.tiny import calib_texts


def test_kl_margin_cost_properties():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(5, 11, generator=g), torch.randn(5, 11, generator=g)
    assert torch.all(kl_margin_cost(a, a) == 0)
    c = kl_margin_cost(a, b)
    assert c.shape == (5,) and torch.all(c >= 0)
    soft = kl_margin_cost(a, b, phi="softplus")
    assert torch.all(soft >= c - 1e-6)
    # by hand for one position
    lp, lq = torch.log_softmax(a[0], -1), torch.log_softmax(b[0], -1)
    d = lp - lq
    ref = (lp.exp() * torch.relu(torch.log(torch.tensor(0.5)) + d)).sum() + (
        lq.exp() * torch.relu(torch.log(torch.tensor(0.5)) + d)
    ).sum()
    assert float(c[0]) == pytest.approx(float(ref), rel=1e-5)
    with pytest.raises(ViaSDConfigError, match="phi"):
        kl_margin_cost(a, b, phi="tanh")


def test_even_and_random_masks():
    assert layer_mask_even(8, 0.45) == [2, 4, 6]
    assert len(layer_mask_even(32, 0.45)) == 14
    r = layer_mask_random(8, 0.45, seed=3)
    assert r == layer_mask_random(8, 0.45, seed=3) and len(r) == 3
    assert all(1 <= i <= 6 for i in r)
    assert layer_mask_even(8, 0.0) == []


def test_dimr_beats_even_and_is_deterministic(fx, searched_mask):
    """A fresh search equals the cached one of the claim tests (``via-sd-mask``, same settings:
    deterministic, also across processes when the entry comes from the cache) and is no worse
    than the even mask and three random ones."""
    calib = [torch.tensor(encode(fx.tokenizer, t)) for t in calib_texts(16)]
    r1 = dimr_search(fx.target, calib, seed=0)
    cached = searched_mask.metrics
    even = mask_cost(fx.target, calib, layer_mask_even(8, 0.45))
    assert r1.skip_layers == cached["skip_layers"]
    assert r1.cost == pytest.approx(cached["cost"], rel=1e-6)
    assert len(r1.history) == cached["evaluations"]
    assert r1.cost <= even + 1e-9
    assert r1.baseline_cost_even == pytest.approx(even)
    rand = [mask_cost(fx.target, calib, layer_mask_random(8, 0.45, seed=s)) for s in range(3)]
    assert r1.cost <= min(rand) + 1e-9
    assert len(r1.skip_layers) == 3 and r1.history[0]["kind"] == "even"
    print(f"\nDIMR cost {r1.cost:.2f} mask {r1.skip_layers}; even {even:.2f}; random {rand}")
