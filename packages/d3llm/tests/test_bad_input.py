"""Bad input gets clear errors naming the value and the fix."""

from __future__ import annotations

import pytest
import torch
from conftest import MASK
from d3llm import (
    D3LLMConfigError,
    MaskedDiffusionLM,
    NFECapError,
    decode_multiblock,
    decode_threshold,
    decode_vanilla,
)


def test_mask_token_problems(tiny_mdlm, prompt):
    with pytest.raises(D3LLMConfigError, match="mask_token_id"):
        MaskedDiffusionLM(tiny_mdlm.model, None)  # type: ignore[arg-type]
    with pytest.raises(D3LLMConfigError, match="already contains the mask id"):
        decode_vanilla(tiny_mdlm, [1, MASK, 4], gen_length=4, steps=4, block_length=4)
    with pytest.raises(D3LLMConfigError, match="logits_shift"):
        MaskedDiffusionLM(tiny_mdlm.model, MASK, "left")  # type: ignore[arg-type]


def test_tokenizer_without_mask():
    from d3llm import build_tiny_mdlm

    from llmcore.zoo import word_tokenizer

    tok = word_tokenizer(["a", "b"])
    tok.mask_token = None
    with pytest.raises(D3LLMConfigError, match="no mask token"):
        build_tiny_mdlm(tok, hidden=16, layers=1, heads=2, intermediate=32)


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"gen_length": 10, "steps": 10, "block_length": 4}, "multiple of block_length"),
        ({"gen_length": 8, "steps": 3, "block_length": 4}, "multiple of the number of blocks"),
        ({"gen_length": 0, "steps": 4, "block_length": 4}, "positive"),
        ({"gen_length": 8, "steps": 8, "block_length": 4, "temperature": -1}, "temperature"),
    ],
)
def test_vanilla_bad_lengths(tiny_mdlm, prompt, kw, match):
    with pytest.raises(D3LLMConfigError, match=match):
        decode_vanilla(tiny_mdlm, prompt, **kw)


def test_threshold_ranges(tiny_mdlm, prompt):
    with pytest.raises(D3LLMConfigError, match=r"\(0, 1\]"):
        decode_threshold(tiny_mdlm, prompt, 8, 4, mode="confidence", threshold=1.5)
    with pytest.raises(D3LLMConfigError, match=r"\(0, 1\]"):
        decode_threshold(tiny_mdlm, prompt, 8, 4, mode="confidence", threshold=0.0)
    with pytest.raises(D3LLMConfigError, match=">= 0"):
        decode_threshold(tiny_mdlm, prompt, 8, 4, mode="entropy", threshold=-0.1)
    with pytest.raises(D3LLMConfigError, match="block_add_threshold"):
        decode_multiblock(tiny_mdlm, prompt, 8, 4, block_add_threshold=1.2)
    with pytest.raises(D3LLMConfigError, match="decoded_token_threshold"):
        decode_multiblock(tiny_mdlm, prompt, 8, 4, decoded_token_threshold=-0.2)
    with pytest.raises(D3LLMConfigError, match="cache_delay_iter"):
        decode_multiblock(tiny_mdlm, prompt, 8, 4, use_kv_cache=True, cache_delay_iter=-1)
    with pytest.raises(D3LLMConfigError, match="refresh_interval"):
        decode_multiblock(tiny_mdlm, prompt, 8, 4, use_kv_cache=True, refresh_interval=0)
    with pytest.raises(D3LLMConfigError, match="multiple of block_size"):
        decode_multiblock(tiny_mdlm, prompt, 10, 4)


def test_multiblock_batch_is_not_implemented(tiny_mdlm, prompt):
    with pytest.raises(NotImplementedError, match="loop over the prompts"):
        decode_multiblock(tiny_mdlm, torch.tensor([prompt, prompt]), 8, 4)


def test_nfe_cap_carries_partial_result(tiny_mdlm, prompt):
    with pytest.raises(NFECapError, match="max_nfe=2") as e:
        decode_multiblock(tiny_mdlm, prompt, 16, 4, threshold=0.0, max_nfe=2)
    partial = e.value.partial
    assert partial.nfe == [2] and bool((partial.generated == MASK).any())
    with pytest.raises(NFECapError):
        decode_threshold(tiny_mdlm, prompt, 16, 4, threshold=0.0, max_nfe=3)


def test_load_mdlm_unknown_architecture_needs_shift(tmp_path):
    from conftest import make_llama
    from d3llm import load_mdlm

    from llmcore.zoo import word_tokenizer

    tok = word_tokenizer([f"w{i}" for i in range(16)])
    model = make_llama(vocab=len(tok))
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    with pytest.raises(D3LLMConfigError, match="llada -> 'none', dream -> 'right'"):
        load_mdlm(str(tmp_path / "m"))
    m, _ = load_mdlm(str(tmp_path / "m"), logits_shift="right")
    assert m.logits_shift == "right" and m.mask_token_id == tok.mask_token_id
