"""Checkpoint/resume: a run interrupted after step 33 (last checkpoint at 30) and resumed gives
the same parameters, bitwise, as an uninterrupted run (PAFT-Dyn with overlap, Adam, faults)."""

from __future__ import annotations

import torch


def test_resume_equals_uninterrupted(runs: dict) -> None:
    full, resumed = runs["resume_full"], runs["resume_part2"]
    for rank in (0, 1):
        assert torch.equal(full.final_params(rank), resumed.final_params(rank))
    assert full.summary["syncs"] == resumed.summary["syncs"]
    assert full.summary["test_loss"] == resumed.summary["test_loss"]
