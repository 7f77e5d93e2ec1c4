"""Shared fixtures: the tiny model is built once per machine by llmcore's zoo (cached by hash)."""

from __future__ import annotations

import pytest

from llmcore.zoo import pin_reference_kernels

# The CPU kernels the fixtures were calibrated with (nox sets them too); before any tensor op.
pin_reference_kernels()


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    import torch

    # Tiny shapes: one thread is faster than two on 2-core machines.
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny():
    """The spec-align tiny model behind the HF backend (greedy, 160 new tokens per call)."""
    from spec_align.backends import tiny_backend

    return tiny_backend(max_new_tokens=160)


@pytest.fixture()
def synth():
    from spec_align.synth import make_synthetic_scenario

    return make_synthetic_scenario(seed=3, n_safe=6, n_unsafe=6)
