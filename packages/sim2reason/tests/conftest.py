"""Shared test setup: one torch thread.

The GRPO arm (a cached zoo entry) is built in a subprocess by its fixture builder, or in this
process with ``llmcore.rl.reset_accelerate_state()`` between trainers, so accelerate's
process-wide state never leaks from one trainer into the next.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest
import torch

from llmcore.zoo import pin_reference_kernels

# The CPU kernels the fixtures were calibrated with (nox sets them too); before any tensor op.
pin_reference_kernels()
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def engine():
    from sim2reason.engines import AnalyticEngine

    return AnalyticEngine()
