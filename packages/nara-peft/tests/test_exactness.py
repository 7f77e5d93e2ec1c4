"""Exactness invariants (exact or to float tolerance)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
import torch
from conftest import TARGETS, logits, randomize_b, randomize_mapper_last, small_cfg
from nara_peft import (
    NaraLinear,
    NaraMergeError,
    NaraNoiseLevelError,
    compute_noise_level,
    core_matrix,
    get_nara_model,
    noise_context,
    noise_density,
)
from peft import LoraConfig, PeftModel, get_peft_model


def test_init_equals_base(base, batch):
    ref = logits(base, batch)
    model = get_nara_model(copy.deepcopy(base), small_cfg(init_c="kaiming_uniform_m"))
    for lam in (0.05, 0.5, 1.0):
        torch.testing.assert_close(logits(model, batch, lam), ref, atol=0, rtol=0)


def test_identity_core_reduces_to_lora(base, batch):
    """zero_last => C == I: NaRA equals PEFT LoRA (lora_alpha = r) with the same A, B."""
    nara = get_nara_model(copy.deepcopy(base), small_cfg())
    randomize_b(nara)
    lora = get_peft_model(
        copy.deepcopy(base), LoraConfig(r=4, lora_alpha=4, target_modules=TARGETS)
    )
    nara_layers = {n: m for n, m in nara.named_modules() if isinstance(m, NaraLinear)}
    with torch.no_grad():
        for name, m in lora.named_modules():
            if hasattr(m, "lora_A") and name in nara_layers:
                m.lora_A["default"].weight.copy_(nara_layers[name].nara_A["default"].weight)
                m.lora_B["default"].weight.copy_(nara_layers[name].nara_B["default"].weight)
    assert len(nara_layers) == 8
    ref = logits(lora, batch)
    assert (ref - logits(base, batch)).abs().max() > 1e-3  # the update is not trivial
    for lam in (0.0, 0.2, 0.7, 1.0, [0.1, 0.5, 0.9]):
        torch.testing.assert_close(logits(nara, batch, lam), ref, atol=1e-6, rtol=0)


def _nontrivial(base, **kw):
    torch.manual_seed(0)
    model = get_nara_model(copy.deepcopy(base), small_cfg(**kw))
    randomize_b(model)
    randomize_mapper_last(model)
    return model


def test_core_matrix_rows_and_permutation(base):
    model = _nontrivial(base)
    lam = torch.tensor([0.1, 0.6, 0.95])
    c = core_matrix(model, lam)
    assert c.shape == (3, 4, 4)
    for i in range(3):
        torch.testing.assert_close(c[i], core_matrix(model, lam[i : i + 1])[0])
    assert not torch.allclose(c[0], c[1])
    x = torch.randint(0, 17, (1, 16)).expand(3, 16).contiguous()
    perm = torch.tensor([2, 0, 1])
    out = logits(model, x, lam)
    out_p = logits(model, x, lam[perm])
    torch.testing.assert_close(out_p, out[perm], atol=1e-6, rtol=0)
    assert (out[0] - out[1]).abs().max() > 1e-4


def test_scalar_vector_and_pooled(base, batch):
    model = _nontrivial(base)
    a = logits(model, batch, 0.4)
    b = logits(model, batch, [0.4, 0.4, 0.4])
    torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    pooled = _nontrivial(base, pool_noise_level=True)
    torch.testing.assert_close(logits(pooled, batch, [0.4] * 3), b, atol=1e-6, rtol=0)


def test_merge_at_fixed_lambda(base, batch):
    model = _nontrivial(base)
    with pytest.raises(NaraMergeError, match="noise level"):
        model.merge_and_unload()
    with pytest.raises(NaraMergeError):
        model.merge_adapter()
    ref = logits(model, batch, 0.3)
    with pytest.warns(UserWarning, match="noise_level=0.3"):
        merged = model.merge_and_unload(noise_level=0.3)
    assert not any(isinstance(m, NaraLinear) for m in merged.modules())
    torch.testing.assert_close(logits(merged, batch), ref, atol=1e-5, rtol=0)


def test_merge_constant_mode_exact(base, batch):
    model = get_nara_model(copy.deepcopy(base), small_cfg(input_mode="constant"))
    randomize_b(model)
    with torch.no_grad():
        model.base_model.nara_const_c["default"].normal_()
    ref = logits(model, batch)
    merged = model.merge_and_unload()
    torch.testing.assert_close(logits(merged, batch), ref, atol=1e-5, rtol=0)


def test_unload_and_disable(base, batch):
    model = _nontrivial(base)
    ref = logits(base, batch)
    with model.disable_adapter():
        torch.testing.assert_close(logits(model, batch), ref, atol=0, rtol=0)
    assert (logits(model, batch, 0.5) - ref).abs().max() > 1e-4
    torch.testing.assert_close(logits(model.unload(), batch), ref, atol=0, rtol=0)


LOAD_SCRIPT = r"""
import json, sys, torch
torch.set_num_threads(1)
import nara_peft  # registers NARA
from peft import PeftModel, PeftConfig
from nara_peft.synth import tiny_model, logits_of
base = tiny_model(0).eval()
path = sys.argv[1]
assert PeftConfig.from_pretrained(path).peft_type == "NARA"
model = PeftModel.from_pretrained(base, path).eval()
x = torch.load(sys.argv[2])
outs = [logits_of(model, x, torch.tensor(l)).tolist() for l in json.loads(sys.argv[3])]
torch.save(torch.tensor(outs), sys.argv[4])
"""


def test_save_load_fresh_process(base, batch, tmp_path):
    from safetensors.torch import load_file

    model = _nontrivial(base)
    lams = [0.0, 0.25, 0.5, 0.75, 1.0]
    ref = torch.stack([logits(model, batch, lam) for lam in lams])
    model.save_pretrained(tmp_path / "ad")
    sd = load_file(str(tmp_path / "ad" / "adapter_model.safetensors"))
    mapper_keys = [k for k in sd if "nara_mapper" in k]
    assert sorted(mapper_keys) == sorted(
        f"base_model.nara_mapper.shared.{i}.{w}" for i in (0, 2, 4) for w in ("weight", "bias")
    )
    assert "base_model.nara_phi.freqs" in sd
    assert not any(".default" in k for k in sd)
    assert sum("nara_A" in k for k in sd) == 8
    torch.save(batch, tmp_path / "x.pt")
    subprocess.run(
        [
            sys.executable,
            "-c",
            LOAD_SCRIPT,
            str(tmp_path / "ad"),
            str(tmp_path / "x.pt"),
            json.dumps(lams),
            str(tmp_path / "out.pt"),
        ],
        check=True,
    )
    out = torch.load(tmp_path / "out.pt")
    assert torch.equal(out, ref)  # bit-identical


def test_missing_noise_and_staleness(base, batch):
    model = _nontrivial(base)
    with pytest.raises(NaraNoiseLevelError, match="noise_level"):
        logits(model, batch)
    logits(model, batch, 0.5)
    with pytest.raises(NaraNoiseLevelError):
        logits(model, batch)  # no stale C from the previous forward
    layer = next(m for m in model.modules() if isinstance(m, NaraLinear))
    with pytest.raises(NaraNoiseLevelError, match="outside a forward"):
        layer(torch.randn(2, 64))
    with noise_context(model, 0.5):
        torch.testing.assert_close(logits(model, batch), logits(model, batch, 0.5))


def test_causal_lm_task_type_and_mask_fraction(base, batch):
    from nara_peft.synth import MASK_ID

    cfg = small_cfg(task_type="CAUSAL_LM", noise_source="mask_fraction", mask_token_id=MASK_ID)
    model = get_nara_model(copy.deepcopy(base), cfg)
    randomize_b(model)
    randomize_mapper_last(model)
    x = batch.clone()
    x[:, :6] = MASK_ID
    lam = compute_noise_level(x, MASK_ID)
    torch.testing.assert_close(logits(model, x), logits(model, x, lam), atol=1e-6, rtol=0)


def test_gradient_checkpointing_identical_grads(base, batch):
    def grads(ckpt):
        torch.manual_seed(0)
        model = _nontrivial(base)
        if ckpt:
            model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
        model.train()
        out = logits(model, batch, [0.2, 0.5, 0.8])
        out.pow(2).mean().backward()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}

    a, b = grads(False), grads(True)
    assert a.keys() == b.keys() and any("nara_mapper" in k for k in a)
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=1e-6, rtol=0)


def test_trainable_params_closed_form(base):
    model = get_nara_model(copy.deepcopy(base), small_cfg())
    n = sum(p.numel() for p in model.parameters() if p.requires_grad)
    m, h1, h2, r = 16, 32, 32, 4
    mapper = (m * h1 + h1) + (h1 * h2 + h2) + (h2 * r * r + r * r)
    lora = 2 * 4 * r * (64 + 64)
    assert n == mapper + lora == 6224


def test_reference_overhead_closed_form():
    from nara_peft.config import reference_config

    cfg = reference_config()
    m, h1, h2, r = cfg.embedding_dim, cfg.fnn_hidden_size_1, cfg.fnn_hidden_size_2, cfg.r
    mapper = (m * h1 + h1) + (h1 * h2 + h2) + (h2 * r * r + r * r)
    assert mapper == 673_536
    assert round(100 * mapper / (32 * 4 * r * 8192), 1) == 2.0


def test_noise_level_and_density():
    x = torch.tensor([[1, 2, 9, 9, 3, 9], [9, 9, 9, 9, 9, 9]])
    lam = compute_noise_level(x, 9, prompt_lengths=torch.tensor([2, 4]))
    torch.testing.assert_close(lam, torch.tensor([0.75, 1.0]))
    mask = torch.tensor([[True, True, False, False, True]])
    # radius 1: pos0 -> 1/1, pos1 -> 1/2, pos4 -> 0/1; mean over masked = 0.5
    torch.testing.assert_close(noise_density(mask, 1), torch.tensor([0.5]))
    torch.testing.assert_close(
        noise_density(torch.zeros(1, 4, dtype=torch.bool), 2), torch.zeros(1)
    )


def test_generate_deterministic(base):
    from nara_peft import generate
    from nara_peft.synth import MASK_ID

    model = _nontrivial(base)
    prompt = torch.randint(0, 16, (2, 6), generator=torch.Generator().manual_seed(3))
    a = generate(model, prompt, mask_token_id=MASK_ID, steps=10, gen_length=10, block_length=5)
    b = generate(model, prompt, mask_token_id=MASK_ID, steps=10, gen_length=10, block_length=5)
    assert torch.equal(a, b)
    assert torch.equal(a[:, :6], prompt)
    assert not (a == MASK_ID).any()


def test_generate_is_llmcore_sampler_for_plain_models(base):
    """Without NaRA, CFG or EOS, ``generate`` is exactly llmcore's ``llada_generate``."""
    from nara_peft import generate
    from nara_peft.synth import MASK_ID

    from llmcore.diffusion import llada_generate

    prompt = torch.randint(0, 16, (3, 5), generator=torch.Generator().manual_seed(4))
    for temperature, remasking in ((0.0, "low_confidence"), (0.8, "random")):
        kw = dict(gen_length=8, steps=8, block_length=4, temperature=temperature)
        a = generate(
            base,
            prompt,
            mask_token_id=MASK_ID,
            remasking=remasking,
            pass_noise=False,
            generator=torch.Generator().manual_seed(5),
            **kw,
        )
        b = llada_generate(
            base,
            prompt,
            MASK_ID,
            remasking=remasking,
            generator=torch.Generator().manual_seed(5),
            **kw,
        )
        assert torch.equal(a, b), (temperature, remasking)


def test_generate_passes_answer_mask_fraction_each_step(base):
    """lambda at every denoising step is the masked fraction of the answer canvas (per row);
    ``inference_noise='full_sequence'`` counts the prompt too."""
    from nara_peft import generate
    from nara_peft.synth import MASK_ID

    model = _nontrivial(base)
    seen = []
    forward = model.forward

    def spy(*args, **kw):
        seen.append((kw["input_ids"].clone(), kw["noise_level"].clone()))
        return forward(*args, **kw)

    model.forward = spy
    prompt = torch.randint(0, 16, (2, 4), generator=torch.Generator().manual_seed(6))
    generate(model, prompt, mask_token_id=MASK_ID, steps=6, gen_length=6, block_length=3)
    assert len(seen) == 6
    torch.testing.assert_close(seen[0][1], torch.ones(2))
    for x, lam in seen:
        torch.testing.assert_close(lam, (x[:, 4:] == MASK_ID).float().mean(1))
    seen.clear()
    generate(
        model,
        prompt,
        mask_token_id=MASK_ID,
        steps=3,
        gen_length=6,
        block_length=6,
        inference_noise="full_sequence",
    )
    torch.testing.assert_close(seen[0][1], torch.full((2,), 6 / 10))


def test_generate_eos_fills_after_the_block_every_row_ended(base):
    from nara_peft.diffusion import _eos_fill

    x = torch.tensor([[1, 2, 3, 9, 4, 5, 6, 7], [1, 9, 3, 3, 4, 9, 6, 7]])
    out = _eos_fill(x.clone(), prompt_length=2, block_length=2, eos=9)
    # row 0 ends in block [2:4], row 1 in [4:6]: everything after position 6 becomes EOS
    assert out.tolist() == [[1, 2, 3, 9, 4, 5, 9, 9], [1, 9, 3, 3, 4, 9, 9, 9]]


def test_llada_ff_out_only_inside_blocks():
    from nara_peft import NaraConfig
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(8, 8)
            self.ff_out = nn.Linear(8, 8)

    class Trunk(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([Block(), Block()])
            self.ff_out = nn.Linear(8, 8)

    class Toy(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = Trunk()

        def forward(self, x):
            for b in self.transformer.blocks:
                x = b.ff_out(b.q_proj(x))
            return self.transformer.ff_out(x)

    cfg = NaraConfig(
        r=2, target_modules=["ff_out"], embedding_dim=4, fnn_hidden_size_1=4, fnn_hidden_size_2=4
    )
    model = get_nara_model(Toy(), cfg)
    adapted = sorted(n for n, m in model.named_modules() if isinstance(m, NaraLinear))
    assert adapted == [
        "base_model.model.transformer.blocks.0.ff_out",
        "base_model.model.transformer.blocks.1.ff_out",
    ]
    assert model(torch.randn(2, 8), noise_level=0.5).shape == (2, 8)


def test_peft_model_plain_roundtrip_via_get_peft_model(base, batch, tmp_path):
    """Plain peft API (no nara helper) works after import."""
    model = get_peft_model(copy.deepcopy(base), small_cfg())
    randomize_b(model)
    model.save_pretrained(tmp_path)
    loaded = PeftModel.from_pretrained(copy.deepcopy(base), tmp_path)
    assert "noise_level" in loaded.special_peft_forward_args
    torch.testing.assert_close(logits(loaded, batch, 0.3), logits(model, batch, 0.3))


def test_conv1d_gpt2_merge_at_lambda():
    from nara_peft import NaraConfig
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    gpt = GPT2LMHeadModel(GPT2Config(vocab_size=32, n_embd=32, n_layer=1, n_head=2, n_positions=16))
    cfg = NaraConfig(
        r=2, target_modules=["c_attn"], embedding_dim=4, fnn_hidden_size_1=8, fnn_hidden_size_2=8
    )
    model = get_nara_model(gpt.eval(), cfg)
    randomize_b(model)
    randomize_mapper_last(model)
    x = torch.randint(0, 32, (2, 8))
    ref = model(input_ids=x, noise_level=0.6).logits
    assert (ref - model(input_ids=x, noise_level=0.1).logits).abs().max() > 1e-5
    with pytest.warns(UserWarning):
        merged = model.merge_and_unload(noise_level=0.6)
    torch.testing.assert_close(merged(input_ids=x).logits, ref, atol=1e-5, rtol=0)
