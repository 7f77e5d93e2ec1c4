"""Exactness and property tests of rotations, fusion and residual transitions."""

import copy

import pytest
import torch
from conftest import make_model
from respin_quant.arch import exact_norms
from respin_quant.config import QuantConfig
from respin_quant.learn import _lm_loss, cayley_step, training_model
from respin_quant.rotation import (
    apply_rotations,
    approximate_transition,
    fuse_norms,
    init_rotations,
    polar,
    transition_hat,
)


def layerwise(model, seed=0, eps=0.05):
    """Shared-Hadamard init perturbed per slot (stands in for learned layer-wise rotations)."""
    rs = init_rotations(model, "respin", seed)
    g = torch.Generator().manual_seed(seed + 100)
    pert = lambda r: polar(r + eps * torch.randn(r.shape, generator=g, dtype=torch.float64))  # noqa: E731
    rs.R_attn = [pert(r) for r in rs.R_attn]
    rs.R_ffn = [pert(r) for r in rs.R_ffn]
    return rs


def spinquant_like(model, seed=0):
    rs = init_rotations(model, "spinquant", seed)
    g = torch.Generator().manual_seed(7)
    R = polar(
        rs.R_attn[0] + 0.05 * torch.randn(rs.R_attn[0].shape, generator=g, dtype=torch.float64)
    )
    L = len(rs.R_ffn)
    rs.R_attn, rs.R_ffn = [R] * (L + 1), [R] * L
    return rs


CASES = {
    "norms": lambda m: None,
    "quarot": lambda m: (init_rotations(m, "quarot", 1), 0, False),
    "spinquant": lambda m: (spinquant_like(m), 0, False),
    "respin_full": lambda m: (layerwise(m), "full", False),
    "respin_rebase_r8": lambda m: (layerwise(m), 8, True),
    "respin_rebase_r32": lambda m: (layerwise(m), 32, True),
}


def _fused(model, case):
    m = copy.deepcopy(model)
    spec = CASES[case](model)
    if spec is None:
        fuse_norms(m)
    else:
        rs, r, rebase = spec
        apply_rotations(m, rs, r, rebase)
    return m


@pytest.mark.parametrize("case", sorted(CASES))
def test_fusion_exact_float64(arch, case, ids):
    model = exact_norms(make_model(arch, torch.float64))
    with torch.no_grad():
        ref = model(ids).logits
        out = _fused(model, case)(ids).logits
    assert float((out - ref).abs().max()) <= 1e-9


@pytest.mark.parametrize("case", sorted(CASES))
def test_fusion_float32_relative(arch, case, ids):
    model = make_model(arch, torch.float32)
    with torch.no_grad():
        ref = model(ids).logits
        out = _fused(model, case)(ids).logits
    assert float((out - ref).abs().max()) / float(ref.abs().max()) <= 1e-4


def test_paper_mode_low_rank_deviation_is_reported(ids):
    """r < D in paper mode changes the FP function: measured, and shrinking with r."""
    model = exact_norms(make_model("llama", torch.float64))
    ref = model(ids).logits
    rs = layerwise(model)
    devs = {}
    for r in (0, 8, 32, 64):
        m = apply_rotations(copy.deepcopy(model), rs, r, False)
        devs[r] = float((m(ids).logits - ref).abs().max().detach())
    print("paper-mode max |dlogit| by rank:", devs)
    assert devs[0] > 1e-3 and devs[64] <= 1e-9
    assert devs[32] < devs[0]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_training_forward_equals_original(arch, ids, dtype):
    model = make_model(arch, dtype)
    if dtype == torch.float64:
        exact_norms(model)
    q = QuantConfig(w_bits=16, a_bits=16)
    tm, _ = training_model(model, layerwise(model), q, shared=False, w_bits=16)
    with torch.no_grad():
        ref = model(ids).logits
        diff = float((tm(ids).logits - ref).abs().max())
    # float32: relative to the largest logit (random 0.2-scale weights give large activations)
    assert (diff if dtype == torch.float64 else diff / float(ref.abs().max())) <= 1e-5


def test_approximate_transition_properties():
    g = torch.Generator().manual_seed(0)
    D = 32
    A = polar(
        torch.eye(D, dtype=torch.float64)
        + 0.1 * torch.randn(D, D, generator=g, dtype=torch.float64)
    )
    B = polar(
        torch.eye(D, dtype=torch.float64)
        + 0.1 * torch.randn(D, D, generator=g, dtype=torch.float64)
    )
    T = A.T @ B
    prev = float("inf")
    for r in range(D + 1):
        Q, M = approximate_transition(T, r)
        Th = transition_hat(Q, M)
        assert float((Th.T @ Th - torch.eye(D, dtype=torch.float64)).abs().max()) <= 1e-10
        err = float(torch.linalg.norm(Th - T))
        assert err <= prev + 1e-10
        prev = err
        if r == 0:
            assert torch.equal(Th, torch.eye(D, dtype=torch.float64))
    assert prev <= 1e-10  # r = D returns T
    Q, M = approximate_transition(torch.eye(D, dtype=torch.float64), 4)
    assert float(M.abs().max()) <= 1e-12  # identical bases -> M = 0
    with pytest.raises(ValueError, match="residual_rank"):
        approximate_transition(T, D + 1)
    with pytest.raises(ValueError, match="residual_rank"):
        approximate_transition(T, -1)


def test_shared_init_gives_identity_transitions(arch):
    model = make_model(arch)
    rs = init_rotations(model, "respin", 3)
    for T in rs.transitions():
        assert torch.equal(T, rs.R_attn[0].T @ rs.R_attn[0])
        assert float((T - torch.eye(T.shape[0], dtype=torch.float64)).abs().max()) <= 1e-12
    assert rs.orthogonality_error() <= 1e-12


def test_cayley_keeps_orthogonality_and_lowers_loss():
    torch.manual_seed(0)
    model = make_model("llama", torch.float32, hidden=32, layers=1, inter=64)
    q = QuantConfig(w_bits=4, a_bits=4, w_clip="none")
    tm, params = training_model(
        model, init_rotations(model, "respin", 0), q, shared=False, w_bits=4
    )
    batch = torch.randint(0, 40, (4, 16), generator=torch.Generator().manual_seed(1))
    first = None
    for _step in range(100):
        loss = _lm_loss(tm, batch)
        first = loss.item() if first is None else first
        params.zero_grad()
        loss.backward()
        for p in params.parameters():
            cayley_step(p.data, p.grad, 0.5)
    last = _lm_loss(tm, batch).item()
    assert last < first
    for p in params.parameters():
        eye = torch.eye(p.shape[0])
        assert float((p.data.T @ p.data - eye).abs().max()) <= 1e-5
