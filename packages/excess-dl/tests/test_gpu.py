"""vLLM test-loss scoring (needs CUDA and the ``vllm`` extra; skipped otherwise)."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.gpu


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_vllm_scoring_matches_hf(tiny, small_data, tmp_path):
    pytest.importorskip("vllm")
    from excess_dl import code_lengths
    from excess_dl.data import normalize_examples
    from excess_dl.scoring import vllm_code_lengths

    from llmcore.generation import VLLMBackend

    model, tok = tiny
    _, test = small_data
    model.save_pretrained(tmp_path, safe_serialization=True)
    tok.save_pretrained(tmp_path)
    backend = VLLMBackend(str(tmp_path), dtype="float32")
    got = vllm_code_lengths(backend, normalize_examples(test, tok))
    ref = code_lengths(model, tok, test)
    assert got == pytest.approx(ref, abs=1e-2)
