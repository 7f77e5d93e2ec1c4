"""Accounting invariants of the prequential code on a tiny random model (exact, fast)."""

from __future__ import annotations

import math

import pytest
import torch
from excess_dl import EDLConfig, code_lengths, compute_edl


def test_nats_to_bits_and_completion_only(tiny, small_data):
    """code_lengths = -log p(completion | prompt) / ln 2, the prompt's tokens contribute nothing:
    it equals NLL(bos + prompt + completion) - NLL(bos + prompt) from plain forwards."""
    from llmcore.metrics import completion_logprobs

    model, tok = tiny
    train, _ = small_data
    bits = code_lengths(model, tok, train)
    ll = completion_logprobs(
        model, tok, [(r["prompt"], r["completion"]) for r in train], reduce="sum"
    )
    for b, v in zip(bits, ll, strict=True):
        assert b == pytest.approx(-v / math.log(2), abs=1e-6)

    def nll(ids):
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), -1)
        return -sum(logp[t, ids[t + 1]].item() for t in range(len(ids) - 1))

    for r, b in zip(train[:3], bits, strict=False):
        p = [tok.bos_token_id, *tok(r["prompt"], add_special_tokens=False)["input_ids"]]
        c = tok(r["completion"], add_special_tokens=False)["input_ids"]
        assert b == pytest.approx((nll(p + c) - nll(p)) / math.log(2), abs=1e-4)
    # another prompt changes the code; the prompt's own tokens never enter it
    other = code_lengths(model, tok, [("a a a a =", train[0]["completion"])])
    assert other[0] != pytest.approx(bits[0], abs=1e-6)


def test_batch_size_does_not_change_code(tiny, small_data):
    model, tok = tiny
    train, test = small_data
    rows = train + test
    b1 = code_lengths(model, tok, rows, batch_size=1)
    b16 = code_lengths(model, tok, rows, batch_size=16)
    assert max(abs(a - b) for a, b in zip(b1, b16, strict=True)) <= 1e-4


def test_online_curve_accounting(tiny, small_data):
    """sum_i (l_i - L(theta_n)) = EDL to 1e-6; the first example is coded by the base; the
    caller's model is untouched."""
    from llmcore.zoo import weights_digest

    model, tok = tiny
    train, test = small_data
    before = weights_digest(model)
    curve = compute_edl(model, train, test, EDLConfig(accuracy=False), tok)
    assert weights_digest(model) == before
    assert curve.ns == [1, 2, 4, 8]
    last = curve.points[-1]
    assert math.fsum(curve.per_example_bits) == pytest.approx(last.mdl_bits, abs=1e-9)
    edl = math.fsum(v - last.test_bits_per_example for v in curve.per_example_bits)
    assert edl == pytest.approx(last.edl_bits, abs=1e-6)
    assert curve.per_example_bits[0] == pytest.approx(
        code_lengths(model, tok, train[:1])[0], abs=1e-4
    )
    base = code_lengths(model, tok, test)
    assert last.base_test_bits_per_example == pytest.approx(sum(base) / len(base), abs=1e-4)
    assert last.zero_shot_code_bits == pytest.approx(8 * last.base_test_bits_per_example)


def test_blockwise_single_block_is_base_code(tiny, small_data):
    """Boundaries [0, n]: MDL is the base model's summed code on D; sum of block bits = MDL."""
    model, tok = tiny
    train, test = small_data
    curve = compute_edl(
        model, train, test, EDLConfig(mode="blockwise", block_sizes=[8], accuracy=False), tok
    )
    base = code_lengths(model, tok, train)
    assert curve.block_boundaries == [0, 8]
    assert curve.points[-1].mdl_bits == pytest.approx(sum(base), abs=1e-4)
    cfg = EDLConfig(mode="blockwise", block_sizes=[1, 2, 4, 8], accuracy=False, fit_max_steps=5)
    curve = compute_edl(model, train, test, cfg, tok)
    assert curve.block_boundaries == [0, 1, 2, 4, 8]
    assert math.fsum(curve.block_bits) == pytest.approx(curve.points[-1].mdl_bits, abs=1e-9)
    assert curve.block_bits[0] == pytest.approx(base[0], abs=1e-4)
    assert curve.ns == [1, 2, 4, 8]


def test_blockwise_uniform_first_block(tiny, small_data):
    model, tok = tiny
    train, test = small_data
    cfg = EDLConfig(mode="blockwise", block_sizes=[2, 8], first_block="uniform", accuracy=False)
    curve = compute_edl(model, train, test, cfg, tok)
    tokens = 2 * 5  # four letters and the end symbol per completion
    assert curve.block_bits[0] == pytest.approx(tokens * math.log2(len(tok)), abs=1e-9)


def test_prompt_method_edl_zero_when_test_is_train(tiny, small_data):
    model, tok = tiny
    train, _ = small_data
    curve = compute_edl(
        model, train, train, EDLConfig(method="prompt", allow_overlap=True, accuracy=False), tok
    )
    assert curve.trainable_params == 0
    assert abs(curve.points[-1].edl_bits) <= 1e-6 * curve.points[-1].mdl_bits
    assert curve.points[-1].loss_gap_closed == pytest.approx(0.0, abs=1e-6)


def test_single_pass_reused_loss_equals_eval_forward(tiny, small_data):
    """Without dropout the first-epoch training loss is the code (NeurIPS-2025 shortcut)."""
    model, tok = tiny
    train, test = small_data
    a = compute_edl(
        model, train, test, EDLConfig(mode="single_pass", batch_size=2, accuracy=False), tok
    )
    b = compute_edl(
        model,
        train,
        test,
        EDLConfig(mode="single_pass", batch_size=2, eval_forward=False, accuracy=False),
        tok,
    )
    assert (
        max(abs(x - y) for x, y in zip(a.per_example_bits, b.per_example_bits, strict=True)) <= 1e-4
    )
    assert a.ns == [2, 4, 8]


@pytest.mark.parametrize(
    ("method", "extra", "params"),
    [
        ("full", {}, None),
        ("lora", {"lora": {"r": 1, "target_modules": ["v_proj"]}}, 1 * (32 + 32)),
        ("random_params", {"random_params_k": 10}, 10),
    ],
)
def test_methods_report_trainable_params_and_leave_model(tiny, small_data, method, extra, params):
    from llmcore.zoo import weights_digest

    model, tok = tiny
    train, test = small_data
    before = weights_digest(model)
    curve = compute_edl(model, train, test, EDLConfig(method=method, accuracy=False, **extra), tok)
    assert weights_digest(model) == before
    expected = params if params is not None else sum(p.numel() for p in model.parameters())
    assert curve.trainable_params == expected
    if method != "random_params":  # 10 scalars need not help a random model
        assert curve.points[-1].test_bits_per_example < curve.points[0].base_test_bits_per_example


def test_random_params_moves_exactly_k_entries(tiny, small_data):
    from excess_dl.edl import finetune

    model, tok = tiny
    train, _ = small_data
    cfg = EDLConfig(method="random_params", random_params_k=7, weight_decay=0.1)
    tuned = finetune(model, train, cfg, tok)
    changed = sum(
        int((a != b).sum()) for a, b in zip(model.parameters(), tuned.parameters(), strict=True)
    )
    assert 1 <= changed <= 7


def test_same_seed_same_curve_json(tiny, small_data):
    model, tok = tiny
    train, test = small_data
    torch.use_deterministic_algorithms(True)
    try:
        cfg = EDLConfig(seed=3)
        a = compute_edl(model, train, test, cfg, tok).to_json(timings=False)
        b = compute_edl(model, train, test, EDLConfig(seed=3), tok).to_json(timings=False)
        c = compute_edl(model, train, test, EDLConfig(seed=4), tok).to_json(timings=False)
    finally:
        torch.use_deterministic_algorithms(False)
    assert a == b
    assert a != c
    from excess_dl import EDLCurve

    assert EDLCurve.from_json(a).to_json(timings=False) == a
