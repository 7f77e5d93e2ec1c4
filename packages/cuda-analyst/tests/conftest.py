"""Shared fixtures: the sandbox (skips cleanly without containment or a C compiler) and the
zoo-cached evaluation cache of the pre-written candidates."""

from __future__ import annotations

import shutil

import pytest
import torch

from llmcore.zoo import pin_reference_kernels

# The CPU kernels the fixtures were calibrated with (nox sets them too); before any tensor op.
pin_reference_kernels()
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def sandbox():
    """The contained sandbox where the machine allows it (root with unshare/setpriv, or user
    namespaces); elsewhere (e.g. a CI runner without user namespaces) the tests still run the
    package's own pre-written kernels with resource limits only, and the isolation tests skip
    through ``contained_sandbox``."""
    import warnings

    from cuda_analyst.errors import IsolationError
    from cuda_analyst.sandbox import Sandbox

    try:
        return Sandbox()
    except IsolationError as e:
        warnings.warn(f"no enforceable isolation, tests run with limits only: {e}", stacklevel=1)
        return Sandbox(allow_unisolated=True)


@pytest.fixture(scope="session")
def contained_sandbox(sandbox):
    if not sandbox.isolation.contained:
        pytest.skip(f"no enforceable isolation here: {sandbox.isolation.reason}")
    return sandbox


@pytest.fixture(scope="session")
def cbackend(sandbox):
    if not (shutil.which("gcc") or shutil.which("cc")):
        pytest.skip("no C compiler (gcc/cc) on PATH")
    from cuda_analyst.backends import CBackend

    return CBackend(sandbox=sandbox)


@pytest.fixture(scope="session")
def eval_cache(cbackend):
    """The evaluation cache fixture (built once per machine, ~20 s cold, then loaded)."""
    from cuda_analyst.fixtures import load_eval_cache

    cache, entry = load_eval_cache()
    print(
        f"\ncuda-analyst eval cache: {entry.metrics.get('n')} results (from cache: {entry.from_cache})"
    )
    return cache
