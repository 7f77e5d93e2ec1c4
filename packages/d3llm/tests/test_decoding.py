"""Decoder invariants on a random tiny model (exact, seconds)."""

from __future__ import annotations

import itertools

import pytest
import torch
from conftest import EOS, MASK


def _no_mask_and_progress(res, L):
    gen = res.generated
    assert not bool((gen == MASK).any())
    for b, steps in enumerate(res.commit_step):
        assert min(steps) >= 1 and max(steps) <= res.nfe[b]
        # every forward commits at least one position
        assert set(range(1, res.nfe[b] + 1)) <= set(steps)
        assert res.nfe[b] <= L


def test_vanilla_equals_llada_generate(tiny_mdlm, prompt):
    from d3llm import decode_vanilla

    from llmcore.diffusion import llada_generate

    x = torch.tensor([prompt, [1, 4, 4, 8, 9, 10]])
    for gl, steps, bl in [(16, 16, 4), (16, 8, 8), (12, 6, 4)]:
        ref = llada_generate(tiny_mdlm.model, x, MASK, gen_length=gl, steps=steps, block_length=bl)
        res = decode_vanilla(tiny_mdlm, x, gen_length=gl, steps=steps, block_length=bl)
        assert torch.equal(res.sequences, ref)
        assert res.nfe == [steps, steps]
    res = decode_vanilla(tiny_mdlm, x, gen_length=16, steps=16, block_length=4)
    assert res.tpf_positions == 1.0
    _no_mask_and_progress(res, 16)


def test_vanilla_schedule_sums():
    from d3llm.decoding import vanilla_schedule

    for n in range(0, 40):
        for s in range(1, 9):
            sched = vanilla_schedule(n, s)
            assert sum(sched) == n and len(sched) == s
            assert sched == sorted(sched, reverse=True)
            assert max(sched) - min(sched) <= 1


@pytest.mark.parametrize("mode,thr", [("entropy", 0.5), ("entropy", 2.0), ("confidence", 0.5)])
def test_threshold_invariants(tiny_mdlm, prompt, mode, thr):
    from d3llm import decode_threshold

    res = decode_threshold(
        tiny_mdlm, prompt, gen_length=16, block_length=8, mode=mode, threshold=thr,
        record_history=True,
    )  # fmt: skip
    _no_mask_and_progress(res, 16)
    hist = res.history
    for a, b in itertools.pairwise(hist):
        done = a != MASK
        assert torch.equal(a[done], b[done])  # committed tokens never change


def test_multiblock_degenerates_to_single_block_entropy(tiny_mdlm, prompt):
    from d3llm import decode_multiblock, decode_threshold

    for thr in (0.0, 0.5, 1.5, 3.0):
        a = decode_threshold(tiny_mdlm, prompt, gen_length=16, block_length=4, threshold=thr)
        b = decode_multiblock(
            tiny_mdlm, prompt, max_new_tokens=16, block_size=4, threshold=thr,
            block_add_threshold=1.0, decoded_token_threshold=1.0, early_stop=False,
        )  # fmt: skip
        assert torch.equal(a.sequences, b.sequences)
        assert a.nfe == b.nfe


@pytest.mark.parametrize("thr", [0.3, 1.5])
def test_multiblock_invariants(tiny_mdlm, prompt, thr):
    from d3llm import decode_multiblock

    res = decode_multiblock(
        tiny_mdlm, prompt, max_new_tokens=16, block_size=4, threshold=thr, early_stop=False,
        record_history=True,
    )  # fmt: skip
    _no_mask_and_progress(res, 16)
    for a, b in itertools.pairwise(res.history):
        done = a != MASK
        assert torch.equal(a[done], b[done])


def test_multiblock_early_stop_fills_eos_only_after_eos(prompt):
    from conftest import make_llama
    from d3llm import MaskedDiffusionLM, decode_multiblock

    model = make_llama(seed=3)
    with torch.no_grad():
        model.lm_head.bias = None
        model.lm_head.weight[EOS] += 0.3  # make EOS likely somewhere
    m = MaskedDiffusionLM(model, MASK, "none", EOS)
    res = decode_multiblock(m, prompt, max_new_tokens=16, block_size=4, threshold=1.0,
                            record_history=True)  # fmt: skip
    gen = res.generated[0].tolist()
    assert MASK not in gen
    for a, b in itertools.pairwise(res.history):
        changed = (a != MASK) & (a != b)
        # a committed token changes only into EOS, and only after an EOS
        assert bool((b[changed] == EOS).all())
    if EOS in gen:
        first = gen.index(EOS)
        assert all(t == EOS for t in gen[first:])
        assert res.tokens == [first]


def test_kv_cache_refresh_every_step_equals_no_cache(tiny_mdlm, prompt):
    from d3llm import decode_multiblock

    for thr in (0.5, 2.0):
        a = decode_multiblock(tiny_mdlm, prompt, max_new_tokens=16, block_size=4, threshold=thr)
        b = decode_multiblock(
            tiny_mdlm, prompt, max_new_tokens=16, block_size=4, threshold=thr,
            use_kv_cache=True, cache_delay_iter=1, refresh_interval=1,
        )  # fmt: skip
        assert torch.equal(a.sequences, b.sequences) and a.nfe == b.nfe
        c = decode_multiblock(
            tiny_mdlm, prompt, max_new_tokens=16, block_size=4, threshold=thr,
            use_kv_cache=True, cache_delay_iter=0, refresh_interval=100,
        )  # fmt: skip
        assert c.tokens_processed < a.tokens_processed
        assert not bool((c.generated == MASK).any())


def test_check_bidirectional(tiny_mdlm):
    from conftest import make_llama
    from d3llm import MaskedDiffusionLM, NotBidirectionalError

    tiny_mdlm.check_bidirectional()

    class Causal(torch.nn.Module):
        """Ignores the full mask it is given: a plain causal decoder."""

        def __init__(self):
            super().__init__()
            self.inner = make_llama()

        def get_input_embeddings(self):
            return self.inner.get_input_embeddings()

        def forward(self, input_ids, attention_mask=None, **kw):
            return self.inner(input_ids=input_ids, use_cache=False)

    with pytest.raises(NotBidirectionalError, match="4-D attention mask"):
        MaskedDiffusionLM(Causal(), MASK).check_bidirectional()
