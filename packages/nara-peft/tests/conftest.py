from __future__ import annotations

import pytest
import torch

from llmcore.zoo import pin_reference_kernels

# The CPU kernels the fixtures were calibrated with (nox sets them too); before any tensor op.
pin_reference_kernels()
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]


@pytest.fixture
def base():
    """The tiny Llama of the synthetic experiment (random init; property tests need no training)."""
    from nara_peft.synth import tiny_model

    return tiny_model(0).eval()


@pytest.fixture
def batch():
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 17, (3, 16), generator=g)


def small_cfg(**kw):
    from nara_peft import NaraConfig

    d = dict(
        r=4, target_modules=TARGETS, embedding_dim=16, fnn_hidden_size_1=32, fnn_hidden_size_2=32
    )
    d.update(kw)
    return NaraConfig(**d)


def randomize_b(model, seed=1):
    from nara_peft import NaraLinear

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, NaraLinear):
                for lin in m.nara_B.values():
                    lin.weight.copy_(torch.randn(lin.weight.shape, generator=g) * 0.1)


def randomize_mapper_last(model, seed=2):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for mods in model.base_model.nara_mapper.values():
            for net in mods.values():
                net[-1].weight.copy_(torch.randn(net[-1].weight.shape, generator=g) * 0.3)
                net[-1].bias.copy_(torch.randn(net[-1].bias.shape, generator=g) * 0.3)


def logits(model, x, lam=None, **kw):
    from nara_peft.synth import logits_of

    if lam is None:
        return logits_of(model, x)
    return logits_of(model, x, torch.as_tensor(lam, dtype=torch.float32), **kw)
