"""Shared fixtures: zoo models are built once per machine (cached) and loaded per session."""

from __future__ import annotations

import pytest

from llmcore.zoo import pin_reference_kernels

# The CPU kernels the fixtures were calibrated with (nox sets them too); before any tensor op.
pin_reference_kernels()


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    import torch

    # Tiny shapes: one thread is faster than two on these 2-core machines.
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_llama_entry():
    from llmcore import zoo

    return zoo.build("tiny-llama", progress=False)


@pytest.fixture(scope="session")
def tiny_llama(tiny_llama_entry):
    return tiny_llama_entry.load()


@pytest.fixture(scope="session")
def tiny_mdlm_entry():
    from llmcore import zoo

    return zoo.build("tiny-mdlm", progress=False)


@pytest.fixture(scope="session")
def tiny_mdlm(tiny_mdlm_entry):
    return tiny_mdlm_entry.load()
