"""Shared test setup: one torch thread, a random Llama over the world's word vocabulary, and the
gated world model from the zoo cache (built on first use)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from llmcore.zoo import pin_reference_kernels

# The CPU kernels the fixtures were calibrated with (nox sets them too); before any tensor op.
pin_reference_kernels()
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def small_world():
    from edit_collapse import world as W

    return W.make_world(12, 2, 0)


@pytest.fixture(scope="session")
def random_pair(small_world):
    """A random 3-layer Llama (d=32) with a word tokenizer over the world's vocabulary."""
    from edit_collapse import world as W
    from transformers import LlamaConfig, LlamaForCausalLM

    from llmcore.zoo import word_tokenizer

    tok = word_tokenizer(W.vocabulary(small_world))
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                      num_attention_heads=4, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id, initializer_range=0.2)  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = LlamaForCausalLM(cfg).eval()
    return model, tok


@pytest.fixture(scope="session")
def world_entry():
    from edit_collapse.tiny import build_world_model

    return build_world_model()


@pytest.fixture(scope="session")
def world(world_entry):
    from edit_collapse import tiny
    from edit_collapse import world as W

    return W.make_world(tiny.N_ENTITIES, tiny.N_RELATIONS, 0)


@pytest.fixture()
def world_pair(world_entry):
    model, tok = world_entry.load()
    model.requires_grad_(True)
    return model, tok


@pytest.fixture(scope="module")
def cli_world(world_entry, tmp_path_factory):
    """The world model's path, its synthetic requests and an FT-M hparams YAML for it."""
    import yaml
    from edit_collapse import tiny
    from edit_collapse.cli import main
    from edit_collapse.experiments import tiny_config

    d = tmp_path_factory.mktemp("cli")
    assert main(["make-synthetic", "-o", str(d / "syn"), "--entities", str(tiny.N_ENTITIES),
                 "--relations", str(tiny.N_RELATIONS), "--n-edits", "4"]) == 0  # fmt: skip
    cfg = {k: v for k, v in dataclasses.asdict(tiny_config("FT-M")).items() if k != "extra"}
    (d / "ft.yaml").write_text(yaml.safe_dump(cfg))
    return {"model": str(world_entry.path), "dir": d, "data": str(d / "syn" / "requests.jsonl"),
            "hparams": str(d / "ft.yaml")}  # fmt: skip
