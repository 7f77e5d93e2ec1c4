"""Integration-test setup: one torch thread (the pipelines run tiny models on CPU, and CI runs
this session on a shared 2-core machine)."""

from __future__ import annotations

import torch

from llmcore.zoo import pin_reference_kernels

# The CPU kernels the fixtures were calibrated with (nox sets them too); before any tensor op.
pin_reference_kernels()
torch.set_num_threads(1)
