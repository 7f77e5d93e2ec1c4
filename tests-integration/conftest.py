"""Integration-test setup: one torch thread (the pipelines run tiny models on CPU, and CI runs
this session on a shared 2-core machine)."""

from __future__ import annotations

import torch

torch.set_num_threads(1)
