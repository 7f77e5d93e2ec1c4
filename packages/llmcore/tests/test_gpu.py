"""CUDA paths of the core (skipped without a GPU): the same zoo checkpoints on the device."""

from __future__ import annotations

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def test_auto_device_and_dtype() -> None:
    from llmcore.runtime import select_device, select_dtype

    dev = select_device()
    assert dev.type == "cuda"
    assert select_dtype(None, dev) in (torch.bfloat16, torch.float32)


def test_greedy_generation_matches_cpu(tiny_llama_entry) -> None:
    from llmcore.generation import HFBackend, SamplingParams
    from llmcore.models import load_causal_lm, load_tokenizer

    tok = load_tokenizer(tiny_llama_entry.path)
    prompts = [f"{tok.bos_token}{a}+{b}:" for a, b in [(12, 34), (47, 38), (5, 90), (66, 66)]]
    params = SamplingParams(max_new_tokens=30)
    cpu = HFBackend(
        load_causal_lm(tiny_llama_entry.path, device="cpu", dtype="float32"), tok, progress=False
    ).generate(prompts, params)
    gpu_model = load_causal_lm(tiny_llama_entry.path, device="cuda", dtype="float32")
    assert gpu_model.device.type == "cuda"
    gpu = HFBackend(gpu_model, tok, progress=False).generate(prompts, params)
    assert [c[0].text for c in cpu] == [c[0].text for c in gpu]
    samples = HFBackend(gpu_model, tok, progress=False).generate(
        prompts[:1], SamplingParams(n=8, temperature=1.0, seed=0, max_new_tokens=20)
    )
    assert len({c.text for c in samples[0]}) > 1


def test_perplexity_matches_cpu(tiny_llama_entry) -> None:
    from llmcore.metrics import perplexity
    from llmcore.models import load_causal_lm, load_tokenizer

    tok = load_tokenizer(tiny_llama_entry.path)
    ids = torch.tensor(tok("12+34: 2+4=6, 1+3=4 ; 46 The river of Kazo is Velmun.").input_ids)
    a = perplexity(load_causal_lm(tiny_llama_entry.path, device="cpu", dtype="float32"), ids)
    b = perplexity(load_causal_lm(tiny_llama_entry.path, device="cuda", dtype="float32"), ids)
    assert b.n_tokens == a.n_tokens and b.ppl == pytest.approx(a.ppl, rel=1e-3)


def test_mdlm_sampler_on_cuda(tiny_mdlm_entry) -> None:
    from llmcore.diffusion import llada_generate
    from llmcore.models import load_causal_lm, load_tokenizer

    tok = load_tokenizer(tiny_mdlm_entry.path)
    model = load_causal_lm(tiny_mdlm_entry.path, device="cuda", dtype="bf16")
    prompt = torch.tensor(
        [[tok.bos_token_id, *tok("The river of", add_special_tokens=False).input_ids]],
        device="cuda",
    )
    out = llada_generate(model, prompt, tok.mask_token_id, gen_length=16, steps=16, block_length=8)
    assert (out != tok.mask_token_id).all() and out.device.type == "cuda"


def test_zoo_recipe_trains_on_cuda(tmp_path, monkeypatch) -> None:
    from dataclasses import replace

    from llmcore import zoo
    from llmcore.zoo.train import build_model, eval_loss, train_lm

    r = zoo.get_recipe("tiny-llama")
    tok = zoo.train_bpe_tokenizer(r.corpus.train[:2000], 512)
    model = build_model(r.model, tok).cuda()
    spec = replace(r.train, steps=200, threads=None)
    stats = train_lm(model, tok, r.corpus.train[:2000], spec, progress=False)
    assert stats["final_train_loss"] < stats["first_loss"] - 2.0
    assert eval_loss(model, tok, r.corpus.eval) < 3.0
