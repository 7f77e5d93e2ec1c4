"""Shared fixtures: one torch thread, the colour world and its cached tiny reasoning model."""

from __future__ import annotations

import pytest
import torch

from llmcore.zoo import pin_reference_kernels

# The CPU kernels the fixtures were calibrated with (nox sets them too); before any tensor op.
pin_reference_kernels()
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def world():
    from monica_syco.world import make_synthetic_world

    return make_synthetic_world(0)


@pytest.fixture(scope="session")
def world_entry():
    """The tiny model's zoo entry (cold build ~80 s CPU on one thread, then cached)."""
    from monica_syco.world import build_tiny_model

    return build_tiny_model(progress=False)


@pytest.fixture(scope="session")
def model_tok(world_entry):
    """One shared (model, tokenizer); tests must not modify the weights."""
    return world_entry.load()


@pytest.fixture(scope="session")
def fitted(model_tok, world):
    """A monitor and calibrator fitted on a small greedy+sampled collection (seconds)."""
    from monica_syco.collect import collect_steps, fit_calibrator, fit_monitor

    model, tok = model_tok
    items = world.items("train")[:96]
    ds = collect_steps(model, tok, items, [2, 3], n_samples=2, max_new_tokens=72, batch_size=96)
    mon = fit_monitor(ds, [2, 3])
    cal = fit_calibrator(ds, [2, 3])
    return mon, cal, ds
