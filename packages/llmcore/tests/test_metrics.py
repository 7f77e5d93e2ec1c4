"""Tests of llmcore.metrics against hand-computed values and brute force."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import numpy as np
import pytest
import torch

from llmcore.errors import ConfigError
from llmcore.metrics import (
    PerplexityResult,
    RougeScore,
    _sliding_windows,
    exact_match,
    extract_number,
    lcs_length,
    mean_pass_at_k,
    normalize_answer,
    numeric_match,
    pass_at_k,
    pass_at_k_array,
    perplexity,
    rouge_l,
    rouge_tokenize,
)

# --- pass@k ----------------------------------------------------------------------------------


def test_pass_at_k_hand_values() -> None:
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)  # 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)  # pass@1 = c/n
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(10, 10, 3) == 1.0
    assert pass_at_k(5, 4, 2) == 1.0  # n - c < k: every k-subset holds a correct sample


def _brute_pass_at_k(n: int, c: int, k: int) -> float:
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(i < c for i in s) for s in subsets) / len(subsets)


def test_pass_at_k_matches_subset_enumeration() -> None:
    for n in range(1, 8):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(_brute_pass_at_k(n, c, k), abs=1e-12)


@pytest.mark.parametrize(("n", "c", "k"), [(10_000, 1, 1), (10_000, 100, 100), (10_000, 9_000, 5)])
def test_pass_at_k_large_n_is_exact(n: int, c: int, k: int) -> None:
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-12)


@pytest.mark.parametrize(
    ("n", "c", "k"), [(5, 6, 1), (5, -1, 1), (5, 2, 0), (5, 2, 6), (5.0, 2, 1), (5, 2, True)]
)
def test_pass_at_k_validation(n: object, c: object, k: object) -> None:
    with pytest.raises(ConfigError):
        pass_at_k(n, c, k)  # type: ignore[arg-type]


def test_pass_at_k_array_and_mean() -> None:
    arr = pass_at_k_array([5, 10, 4], [2, 3, 0], 2)
    assert arr.dtype == np.float64
    np.testing.assert_allclose(arr, [0.7, pass_at_k(10, 3, 2), 0.0])
    assert mean_pass_at_k(np.array([5, 10, 4]), np.array([2, 3, 0]), 2) == pytest.approx(arr.mean())
    np.testing.assert_allclose(pass_at_k_array(5, [0, 2, 5], 2), [0.0, 0.7, 1.0])
    with pytest.raises(ConfigError, match="at least one"):
        mean_pass_at_k(5, [], 1)
    with pytest.raises(ConfigError, match="differ"):
        pass_at_k_array([5, 5], [1, 1, 1], 1)


# --- ROUGE-L ---------------------------------------------------------------------------------


def test_rouge_tokenize_matches_rouge_score_rules() -> None:
    assert rouge_tokenize("Hello, World! It's 2024...") == ["hello", "world", "it", "s", "2024"]
    assert rouge_tokenize("café-au-lait") == ["caf", "au", "lait"]  # non-ASCII is a separator
    assert rouge_tokenize(" ,; ") == []


def test_rouge_l_hand_worked() -> None:
    # pred: the quick brown fox (4); ref: the fox jumped over the quick dog (7); LCS = 2.
    s = rouge_l("The quick brown fox!", "the fox jumped over the quick dog")
    assert isinstance(s, RougeScore)
    assert s.precision == pytest.approx(2 / 4)
    assert s.recall == pytest.approx(2 / 7)
    assert s.fmeasure == pytest.approx(4 / 11)  # 2PR/(P+R)
    # beta = 2 weighs recall: 5PR/(R+4P) = (5/7)/(16/7).
    assert rouge_l(
        "The quick brown fox!", "the fox jumped over the quick dog", beta=2
    ).fmeasure == (pytest.approx(5 / 16))


def test_rouge_l_lin_2004_example() -> None:
    ref = "police killed the gunman"
    assert rouge_l("police kill the gunman", ref).fmeasure == pytest.approx(3 / 4)
    assert rouge_l("the gunman kill police", ref).fmeasure == pytest.approx(2 / 4)


def test_rouge_l_edge_cases() -> None:
    assert rouge_l("", "a b") == RougeScore(0.0, 0.0, 0.0)
    assert rouge_l("a b", "!!") == RougeScore(0.0, 0.0, 0.0)
    assert rouge_l("x y", "a b") == RougeScore(0.0, 0.0, 0.0)
    assert rouge_l("A b C", "a B c") == RougeScore(1.0, 1.0, 1.0)
    # A custom tokenizer keeps case and non-ASCII text.
    s = rouge_l("Ça va", "ça va", tokenizer=str.split)
    assert (s.precision, s.recall) == (0.5, 0.5)
    with pytest.raises(ConfigError):
        rouge_l("a", "a", beta=0)


def _dp_lcs(a: list[int], b: list[int]) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def test_lcs_length_matches_dynamic_programming() -> None:
    rng = random.Random(0)
    for _ in range(300):
        a = [rng.randrange(4) for _ in range(rng.randrange(0, 40))]
        b = [rng.randrange(4) for _ in range(rng.randrange(0, 90))]
        assert lcs_length(a, b) == _dp_lcs(a, b) == lcs_length(b, a)


def test_rouge_l_matches_rouge_score_package() -> None:
    rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    pairs = [
        ("The quick brown fox!", "the fox jumped over the quick dog"),
        ("a b c d e f", "f e d c b a"),
        ("It's 3 o'clock, isn't it?", "it is 3 o clock"),
    ]
    for pred, ref in pairs:
        theirs = scorer.score(ref, pred)["rougeL"]
        ours = rouge_l(pred, ref)
        assert ours.precision == pytest.approx(theirs.precision)
        assert ours.recall == pytest.approx(theirs.recall)
        assert ours.fmeasure == pytest.approx(theirs.fmeasure)


# --- perplexity ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_llama() -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=24,
        initializer_range=0.3,  # large weights so that context visibly changes predictions
    )
    return LlamaForCausalLM(cfg).eval()


@pytest.fixture(scope="module")
def stream() -> torch.Tensor:
    return torch.randint(0, 64, (40,), generator=torch.Generator().manual_seed(1))


def _direct_nll(model: torch.nn.Module, ids: torch.Tensor) -> float:
    """Sum of -log p(x_t | x_<t) for t >= 1 in one forward pass."""
    with torch.no_grad():
        logits = model(ids[None]).logits[0]
    return torch.nn.functional.cross_entropy(logits[:-1], ids[1:], reduction="sum").item()


def test_sliding_windows_tile_every_token_once() -> None:
    for length in range(2, 30):
        for max_length in range(2, 12):
            for stride in range(1, max_length + 1):
                windows = _sliding_windows(length, max_length, stride)
                scored = [t for _, first, end in windows for t in range(first, end)]
                assert scored == list(range(1, length))
                for begin, first, end in windows:
                    assert 0 <= begin < first < end <= length  # >= 1 token of context
                    assert end - begin == min(max_length, length)


def test_perplexity_single_window_equals_direct(tiny_llama, stream) -> None:
    ids = stream[:20]
    nll = _direct_nll(tiny_llama, ids)
    for kwargs in [{"max_length": 20, "stride": 20}, {"max_length": 24, "stride": 5}, {}]:
        res = perplexity(tiny_llama, ids, **kwargs)
        assert isinstance(res, PerplexityResult)
        assert res.n_tokens == 19
        assert res.nll_sum == pytest.approx(nll, rel=1e-5)
        assert res.ppl == pytest.approx(math.exp(nll / 19), rel=1e-5)
        assert res.mean_nll == pytest.approx(nll / 19, rel=1e-5)


@pytest.mark.parametrize("stride", [1, 2, 3, 7, 8, 9])
def test_perplexity_counts_every_token_once(tiny_llama, stream, stride: int) -> None:
    res = perplexity(tiny_llama, stream, max_length=9, stride=stride, batch_size=2)
    assert res.n_tokens == len(stream) - 1
    assert math.isfinite(res.ppl) and res.ppl > 1


def test_perplexity_stride_one_uses_maximal_context(tiny_llama, stream) -> None:
    ids, max_length = stream[:25], 8
    expected = 0.0
    for t in range(1, len(ids)):
        ctx = ids[max(0, t - max_length + 1) : t]  # x_t's window holds max_length tokens
        with torch.no_grad():
            logp = torch.log_softmax(tiny_llama(ctx[None]).logits[0, -1], dim=-1)
        expected -= logp[ids[t]].item()
    res = perplexity(tiny_llama, ids, max_length=max_length, stride=1, batch_size=4)
    assert res.nll_sum == pytest.approx(expected, rel=1e-5)
    # Less context gives a different total, so the test above really checks the context.
    assert perplexity(tiny_llama, ids, max_length=max_length).nll_sum != pytest.approx(expected)


def test_perplexity_stride_equal_max_length_scores_chunks(tiny_llama, stream) -> None:
    # With stride == max_length = 10 the windows are [0,10), [9,19), [18,28), [27,37), [30,40):
    # consecutive windows share the one token that the first new target is conditioned on.
    ids = stream
    windows = [(0, 1, 10), (9, 10, 19), (18, 19, 28), (27, 28, 37), (30, 37, 40)]
    expected = 0.0
    for begin, first, end in windows:
        with torch.no_grad():
            logits = tiny_llama(ids[None, begin:end]).logits[0]
        targets = ids[first:end]
        scores = logits[first - begin - 1 : end - begin - 1]
        expected += torch.nn.functional.cross_entropy(scores, targets, reduction="sum").item()
    res = perplexity(tiny_llama, ids, max_length=10, stride=10)
    assert res.n_tokens == 39
    assert res.nll_sum == pytest.approx(expected, rel=1e-5)


def test_perplexity_batch_size_invariant(tiny_llama, stream) -> None:
    one = perplexity(tiny_llama, stream, max_length=12, stride=5, batch_size=1)
    many = perplexity(tiny_llama, stream, max_length=12, stride=5, batch_size=3)
    assert one.n_tokens == many.n_tokens
    assert one.nll_sum == pytest.approx(many.nll_sum, rel=1e-5)


def test_perplexity_default_max_length_and_input_types(tiny_llama, stream) -> None:
    ref = perplexity(tiny_llama, stream, max_length=24, stride=24)
    for ids in (stream, stream[None], stream.tolist(), stream.numpy()):
        res = perplexity(tiny_llama, ids)  # max_position_embeddings = 24
        assert res.nll_sum == pytest.approx(ref.nll_sum, rel=1e-6)


def test_perplexity_independent_rows_pool_per_row_scores(tiny_llama, stream) -> None:
    """A 2-D input is several streams, each scored on its own (never conditioned on another
    row); windows of all rows share batches and the NLL is pooled."""
    rows = stream[: 3 * 10].reshape(3, 10)
    singles = [perplexity(tiny_llama, r, max_length=6, stride=4) for r in rows]
    for batch_size in (1, 4):
        pooled = perplexity(tiny_llama, rows, max_length=6, stride=4, batch_size=batch_size)
        assert pooled.n_tokens == sum(r.n_tokens for r in singles) == 3 * 9
        assert pooled.nll_sum == pytest.approx(sum(r.nll_sum for r in singles), rel=1e-5)
    joined = perplexity(tiny_llama, rows.reshape(-1), max_length=6, stride=4)
    assert joined.nll_sum != pytest.approx(sum(r.nll_sum for r in singles), rel=1e-5)


def test_perplexity_restores_training_mode(tiny_llama, stream) -> None:
    tiny_llama.train()
    try:
        perplexity(tiny_llama, stream[:10])
        assert tiny_llama.training
    finally:
        tiny_llama.eval()


class _Bigram(torch.nn.Module):
    """A plain torch LM without a config whose next-token distribution ignores context."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.table = torch.nn.Embedding(vocab, vocab)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.table(input_ids)


@pytest.mark.parametrize(("max_length", "stride"), [(2, 1), (2, 2), (5, 3), (6, 6), (100, 7)])
def test_perplexity_plain_module_bigram(max_length: int, stride: int) -> None:
    torch.manual_seed(0)
    model = _Bigram(11)
    ids = torch.randint(0, 11, (23,))
    # For a bigram model any exact tiling of the targets gives the same total.
    with torch.no_grad():
        logp = torch.log_softmax(model.table.weight, dim=-1)
    expected = -sum(logp[ids[t - 1], ids[t]].item() for t in range(1, len(ids)))
    res = perplexity(model, ids, max_length=max_length, stride=stride, batch_size=2)
    assert res.n_tokens == 22
    assert res.nll_sum == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize(
    ("ids", "kwargs", "match"),
    [
        ([1, 2, 3], {"max_length": 4, "stride": 5}, "stride"),
        ([1, 2, 3], {"max_length": 4, "stride": 0}, "stride"),
        ([1, 2, 3], {"max_length": 1}, "max_length"),
        ([1, 2, 3], {"batch_size": 0}, "batch_size"),
        ([1], {}, "at least 2 tokens"),
        ([], {}, "at least 2 tokens"),
        ([[[1, 2], [3, 4]]], {}, "1-D"),
        ([1.0, 2.0], {}, "integer"),
    ],
)
def test_perplexity_validation(ids, kwargs, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        perplexity(_Bigram(5), ids, **({"max_length": 4} | kwargs))


def test_perplexity_needs_max_length_without_config() -> None:
    with pytest.raises(ConfigError, match="max_position_embeddings"):
        perplexity(_Bigram(5), [1, 2, 3])


# --- answer matching -------------------------------------------------------------------------


def test_normalize_and_exact_match() -> None:
    assert normalize_answer("  New\tYork  City!! ") == "new york city"
    assert normalize_answer("Paris .") == "paris"
    assert exact_match("Paris.", " paris")
    assert exact_match("STRASSE", "strasse")
    assert not exact_match("Paris", "Paris, France")
    assert not exact_match("Paris.", "paris", normalize=False)
    assert exact_match("Paris", "Paris", normalize=False)
    assert not exact_match("(a)", "a")  # only trailing sentence punctuation is stripped


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("The answer is 42.", 42.0),
        ("first 3 then 7", 7.0),
        ("x = -12", -12.0),
        ("temperature \u22125.5", -5.5),
        ("It costs $1,234,567.89 total", 1234567.89),
        ("so 3/4 of them", 0.75),
        ("answer: -1/2", -0.5),
        ("1 / 3", 1 / 3),
        ("5-3", 3.0),
        ("GPT-4", 4.0),
        ("value .5", 0.5),
        ("1e-3", 0.001),
        ("12,34", 34.0),  # not a thousands grouping: two numbers
        ("1/0", 0.0),  # zero denominator: not a fraction
        ("no digits here", None),
        ("", None),
    ],
)
def test_extract_number(text: str, value: float | None) -> None:
    got = extract_number(text)
    if value is None:
        assert got is None
    else:
        assert got == pytest.approx(value)


def test_numeric_match() -> None:
    assert numeric_match("The answer is 1,000.", "1000")
    assert numeric_match("#### 18", 18)
    assert numeric_match(0.5, "1/2")
    assert numeric_match("0.333333", "1/3", rel_tol=1e-5)
    assert not numeric_match("0.33", "1/3")
    assert not numeric_match("no number", "3")
    assert not numeric_match("3", "none")
    assert numeric_match("0", "0.0")
