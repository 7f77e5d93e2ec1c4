"""Spec §2.6 / §6.5: checksum trigger + majority reduce repairs a single corrupted rank exactly.

A strict majority needs at least three voters, so this is the suite's one 3-rank run (with two
ranks a corrupted replica and a healthy one cannot be told apart by voting).
"""

from __future__ import annotations

import pytest
import torch
from paft_dist import ExperimentConfig as E
from paft_dist import FaultSpec as F
from paft_dist import PAFTConfig as P
from paft_dist.trainer import run_experiments

REPAIR = P(mode="sync", trigger="checksum", reduce="majority")
BITFLIP = F(
    kind="bitflip", bits="30", num_elements=1, ranks=[1], every=50, start_step=100, end_step=201
)


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> dict:
    cfgs = {
        "ff": E(world_size=3, steps=300, save_params=True),
        "bitflip": E(world_size=3, steps=300, save_params=True, faults=[BITFLIP], paft=REPAIR),
        "gauss": E(
            world_size=3,
            steps=300,
            save_params=True,
            paft=REPAIR,
            faults=[F(kind="gaussian", sigma=0.1, ranks=[1])],
        ),
    }
    root = tmp_path_factory.mktemp("three")
    res = run_experiments(list(cfgs.values()), [root / n for n in cfgs])
    return dict(zip(cfgs, res, strict=True))


def test_bitflip_repaired_bitwise(three: dict) -> None:
    ff, rep = three["ff"], three["bitflip"]
    assert rep.summary["syncs"] == 3
    assert all(rep.summary["finite"])
    assert rep.summary["test_loss"] == ff.summary["test_loss"]
    for rank in range(3):
        assert torch.equal(rep.final_params(rank), ff.final_params(0))


def test_persistent_single_rank_noise_repaired_every_step(three: dict) -> None:
    ff, rep = three["ff"], three["gauss"]
    assert rep.summary["syncs"] == 300
    for rank in range(3):
        assert torch.equal(rep.final_params(rank), ff.final_params(0))
