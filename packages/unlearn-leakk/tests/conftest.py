"""Shared fixtures: one torch thread, the cached fictitious-author world model."""

from __future__ import annotations

import pytest
import torch

from llmcore.zoo import pin_reference_kernels

# The CPU kernels the fixtures were calibrated with (nox sets them too); before any tensor op.
pin_reference_kernels()
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def world_entry():
    """The world recipe's zoo entry (cold build ~2 min on one core, then cached)."""
    from unlearn_leakk.world import world_recipe

    from llmcore import zoo

    return zoo.build(world_recipe(), progress=False)


@pytest.fixture
def world_model(world_entry):
    """A fresh (model, tokenizer) of the world model for each test."""
    return world_entry.load()


@pytest.fixture(scope="session")
def world():
    from unlearn_leakk.world import make_world

    return make_world(0)
