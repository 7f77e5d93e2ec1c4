"""Fault injector, in process: determinism, targets, kinds."""

from __future__ import annotations

import pytest
import torch
from paft_dist import FaultInjector, FaultSpec, FaultSpecError, tensor_fingerprint


def test_gaussian_is_keyed_by_seed_rank_step_index() -> None:
    spec = FaultSpec(kind="gaussian", sigma=0.1, seed=5)
    a, b = torch.zeros(100), torch.zeros(100)
    FaultInjector([spec], rank=0, world_size=2).corrupt_(a, step=3, index=2)
    FaultInjector([spec], rank=0, world_size=2).corrupt_(b, step=3, index=2)
    assert torch.equal(a, b) and a.abs().sum() > 0
    for kw in ({"step": 4, "index": 2}, {"step": 3, "index": 1}):
        c = torch.zeros(100)
        FaultInjector([spec], rank=0, world_size=2).corrupt_(c, **kw)
        assert not torch.equal(a, c)
    c = torch.zeros(100)
    FaultInjector([spec], rank=1, world_size=2).corrupt_(c, step=3, index=2)
    assert not torch.equal(a, c)
    assert abs(float(a.std()) - 0.1) < 0.03


def test_only_target_ranks_and_schedule() -> None:
    spec = FaultSpec(kind="scale", factor=-20.0, ranks=[1], every=5, start_step=10, end_step=21)
    for rank in (0, 1):
        inj = FaultInjector([spec], rank=rank, world_size=2)
        hit = [s for s in range(30) if inj.corrupt_(torch.ones(4), step=s)]
        assert hit == ([10, 15, 20] if rank == 1 else [])


def test_bitflip_changes_exactly_the_bit() -> None:
    spec = FaultSpec(kind="bitflip", bits="30", num_elements=1, seed=1)
    t = torch.full((50,), 0.5)
    before = t.clone()
    ev = FaultInjector([spec], rank=0, world_size=1).corrupt_(t, step=0)
    assert len(ev) == 1 and ev[0].bits == [30]
    diff = (t.view(torch.int32) ^ before.view(torch.int32)).nonzero()
    assert diff.numel() == 1
    assert int((t.view(torch.int32) ^ before.view(torch.int32))[diff[0]]) == 1 << 30
    assert not torch.isfinite(t).all() or t.abs().max() > 1e30
    # sign bit (31) works on int32 views too
    t2 = torch.full((4,), 1.0)
    FaultInjector(
        [FaultSpec(kind="bitflip", bits="31", num_elements=4)], rank=0, world_size=1
    ).corrupt_(t2, step=0)
    assert torch.equal(t2, torch.full((4,), -1.0))


def test_prob_and_zero_and_burst() -> None:
    inj = FaultInjector([FaultSpec(kind="zero", prob=0.3, seed=2)], rank=0, world_size=1)
    hits = sum(bool(inj.corrupt_(torch.ones(3), step=s)) for s in range(400))
    assert 80 < hits < 160
    t = torch.ones(10)
    FaultInjector([FaultSpec(kind="zero")], rank=0, world_size=1).corrupt_(t, step=0)
    assert t.sum() == 0
    inj = FaultInjector(
        [FaultSpec(kind="gaussian", sigma=0.0, burst=(5, 1.0))], rank=0, world_size=1
    )
    kinds = [[e.kind for e in inj.corrupt_(torch.zeros(3), step=s)] for s in range(6)]
    assert kinds[0] == ["gaussian", "burst"] and kinds[1] == ["gaussian"]


def test_fingerprint_sees_any_single_bit() -> None:
    t = torch.randn(1000)
    fp = tensor_fingerprint(t)
    for pos, bit in ((0, 0), (999, 31), (500, 12)):
        u = t.clone()
        u.view(torch.int32)[pos] ^= torch.tensor(
            1 << bit if bit < 31 else -(1 << 31), dtype=torch.int32
        )
        assert tensor_fingerprint(u) != fp
    # order-sensitive
    assert tensor_fingerprint(t.flip(0)) != fp
    assert tensor_fingerprint([t[:500], t[500:]]) == fp


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sigma": -1.0}, "sigma"),
        ({"prob": 1.5}, "prob"),
        ({"fraction": 0.0}, "fraction"),
        ({"kind": "flip"}, "kind"),
        ({"every": 0}, "every"),
        ({"ranks": "0,x"}, "ranks"),
        ({"where": "nowhere"}, "where"),
    ],
)
def test_bad_fault_specs(kwargs: dict, match: str) -> None:
    with pytest.raises(FaultSpecError, match=match):
        FaultSpec(**kwargs)


def test_bad_rank_bits_and_dtype() -> None:
    with pytest.raises(FaultSpecError, match="outside"):
        FaultInjector([FaultSpec(ranks=[2])], rank=0, world_size=2)
    with pytest.raises(FaultSpecError, match="width"):
        FaultInjector(
            [FaultSpec(kind="bitflip", bits="40", num_elements=1)], rank=0, world_size=1
        ).corrupt_(torch.ones(3), step=0)
    with pytest.raises(FaultSpecError, match="floating"):
        FaultInjector([FaultSpec(kind="bitflip", num_elements=1)], rank=0, world_size=1).corrupt_(
            torch.ones(3, dtype=torch.int64), step=0
        )
