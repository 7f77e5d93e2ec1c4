"""Exactness of the pure tensor functions on hand-made tensors (Sec. 6 unit tests 1-3)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sink_probe.metrics import (
    detect_massive,
    mixing_metrics,
    sink_importance,
    sink_mass,
    sink_rate,
)


def random_causal(N=3, L=2, H=4, T=10, seed=0, sharp=3.0):
    g = torch.Generator().manual_seed(seed)
    s = torch.randn(N, L, H, T, T, generator=g, dtype=torch.float64) * sharp
    s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    return s.softmax(-1)


def reference_sink_rate(attn, eps):
    """Gu et al.'s loop, written independently: alpha_j = sum_{i>=j} A_ij / (T - j)."""
    N, L, H, T, _ = attn.shape
    hits = torch.zeros(T, dtype=torch.float64)
    for n in range(N):
        for layer in range(L):
            for h in range(H):
                for j in range(T):
                    alpha = sum(float(attn[n, layer, h, i, j]) for i in range(j, T)) / (T - j)
                    hits[j] += alpha > eps
    return 100 * hits / (N * L * H)


@pytest.mark.parametrize("eps", [0.1, 0.3, 0.6])
def test_sink_rate_matches_reference_formula(eps):
    attn = random_causal(seed=int(eps * 10))
    assert torch.allclose(sink_rate(attn, eps).double(), reference_sink_rate(attn, eps))


def test_sink_importance_uses_the_queries_that_see_j():
    # one head, T=4, uniform causal attention: alpha_j = (1/(T-j)) * sum_{i>=j} 1/(i+1)
    T = 4
    A = torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1).view(-1, 1)
    alpha = sink_importance(A)
    expect = [sum(1 / (i + 1) for i in range(j, T)) / (T - j) for j in range(T)]
    assert torch.allclose(alpha, torch.tensor(expect))
    # a perfect sink: every query on token 0 -> alpha_0 = 1, rate 100 %
    S = torch.zeros(1, 1, 1, T, T)
    S[..., 0] = 1
    assert sink_rate(S, 0.3)[0] == 100 and sink_rate(S, 0.3)[1:].sum() == 0


def test_sink_mass_is_mass_on_sink_over_non_sink_queries():
    attn = random_causal(N=2, T=8)
    m = sink_mass(attn, (0,))
    ref = attn[..., 1:, 0].mean(-1).mean(0)
    assert torch.allclose(m, ref)
    m2 = sink_mass(attn, (0, 3))
    q = [i for i in range(8) if i not in (0, 3)]
    ref2 = attn[..., q, :][..., [0, 3]].sum(-1).mean(-1).mean(0)
    assert torch.allclose(m2, ref2)


def test_detect_massive_finds_planted_spike_and_nothing_in_clean_tensors():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 16, 32, generator=g)
    assert detect_massive(x, tau_abs=100, tau_ratio=1000) == []
    x[1, 0, 7] = 5000.0
    hits = detect_massive(x, tau_abs=100, tau_ratio=1000)
    assert [(e.layer, e.token, e.channel, e.value) for e in hits] == [(1, 0, 7, 5000.0)]
    assert hits[0].ratio > 1000
    # thresholds respected: tau_abs above the spike, or ratio above what it reaches
    assert detect_massive(x, tau_abs=6000, tau_ratio=1000) == []
    assert detect_massive(x, tau_abs=None, tau_ratio=hits[0].ratio * 1.01) == []
    # ratio-only (tiny-model) setting
    small = torch.randn(16, 32, generator=g)
    small[2, 3] = 80.0
    got = detect_massive(small, tau_abs=None, tau_ratio=50)
    assert [(e.token, e.channel) for e in got] == [(2, 3)]


def _mixing_inputs(N=2, H=4, T=9, d=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    attn = random_causal(N=N, L=1, H=H, T=T, seed=seed).float()
    dh = d // H
    values = torch.randn(N, 1, H, T, dh, generator=g)
    w_o = torch.randn(1, d, H * dh, generator=g)
    hidden = torch.randn(N, 2, T, d, generator=g)
    return attn, values, w_o, hidden


@given(seed=st.integers(0, 10_000), T=st.integers(3, 12))
@settings(max_examples=25, deadline=None)
def test_mixing_identity(seed, T):
    attn, values, w_o, hidden = _mixing_inputs(T=T, seed=seed)
    for sink in ((0,), (0, 1)):
        if max(sink) >= T - 1:
            continue
        m = mixing_metrics(attn, values, w_o, hidden, sink)[0]
        assert abs(m["m_S"] + m["M_nn"] + m["M_self"] - 1) < 1e-6


def test_c_sn_is_zero_when_sink_values_are_zero():
    attn, values, w_o, hidden = _mixing_inputs()
    values[..., 0, :] = 0
    m = mixing_metrics(attn, values, w_o, hidden, (0,))[0]
    assert m["C_sn"] == 0.0
    values[..., 0, :] = 1.0
    assert mixing_metrics(attn, values, w_o, hidden, (0,))[0]["C_sn"] > 0


def test_u_ns_is_zero_when_sink_attends_to_itself_with_zero_value():
    attn, values, w_o, hidden = _mixing_inputs()
    # causal row 0 attends only to itself; a zero value gives a zero update of the sink
    values[..., 0, :] = 0
    m = mixing_metrics(attn, values, w_o, hidden, (0,))[0]
    assert m["U_ns"] == 0.0


def test_rank_collapse_proxy_extremes():
    attn, values, w_o, hidden = _mixing_inputs()
    same = hidden.clone()
    same[:, 1] = torch.randn(16).expand_as(same[:, 1])  # identical non-sink tokens
    m = mixing_metrics(attn, values, w_o, same, (0,))[0]
    assert m["r"] < 1e-6 and abs(m["cos"] - 1) < 1e-5
