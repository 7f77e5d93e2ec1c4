"""Shared test setup: one torch thread; the tiny target model fixture (zoo-cached)."""

from __future__ import annotations

import pytest
import torch

from llmcore.zoo import pin_reference_kernels

# The CPU kernels the fixtures were calibrated with (nox sets them too); before any tensor op.
pin_reference_kernels()
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny():
    """The tiny word-level Llama pre-trained on the synthetic CoT set: ``(model, tokenizer)``."""
    from cds_icl.tiny import build_tiny

    model, tok = build_tiny(progress=False).load()
    return model, tok
