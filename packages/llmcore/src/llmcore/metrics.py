"""Evaluation metrics: pass@k, ROUGE-L, sliding-window perplexity and answer matching."""

from __future__ import annotations

import inspect
import math
import operator
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from llmcore.errors import ConfigError, LLMCoreError

if TYPE_CHECKING:
    import torch

__all__ = [
    "PerplexityResult",
    "RougeScore",
    "completion_logprobs",
    "completion_token_ids",
    "exact_match",
    "extract_number",
    "lcs_length",
    "mean_pass_at_k",
    "normalize_answer",
    "numeric_match",
    "pass_at_k",
    "pass_at_k_array",
    "perplexity",
    "rouge_l",
    "rouge_tokenize",
]


# --- pass@k ----------------------------------------------------------------------------------


def _as_int(value: Any, name: str) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ConfigError(f"{name} must be an integer, got {value!r}") from None


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k estimator of Chen et al. (2021), ``1 - C(n-c, k) / C(n, k)``.

    ``n`` samples were drawn for a problem and ``c`` of them are correct. Computed as
    ``1 - prod_{i=n-c+1}^{n} (1 - k/i)`` in log space, so it is exact to float precision for
    any ``n`` (no big binomials). :class:`ConfigError` unless ``0 <= c <= n`` and ``1 <= k <= n``.
    """
    n, c, k = _as_int(n, "n"), _as_int(c, "c"), _as_int(k, "k")
    if not 1 <= k <= n:
        raise ConfigError(f"pass@k needs 1 <= k <= n, got k={k}, n={n}")
    if not 0 <= c <= n:
        raise ConfigError(f"pass@k needs 0 <= c <= n, got c={c}, n={n}")
    if n - c < k:
        return 1.0
    # C(n-c,k)/C(n,k) = prod_{i=n-c+1}^{n} (1 - k/i); -expm1 keeps precision when it is near 1.
    log_ratio = math.fsum(math.log1p(-k / i) for i in range(n - c + 1, n + 1))
    return -math.expm1(log_ratio)


def pass_at_k_array(ns: int | Iterable[int], cs: Iterable[int], k: int) -> np.ndarray:
    """Per-problem :func:`pass_at_k` as a float64 array; ``ns`` may be one int for all problems."""
    cs_arr = np.asarray(list(cs))
    if cs_arr.ndim != 1:
        raise ConfigError(f"cs must be a 1-D sequence of counts, got shape {cs_arr.shape}")
    ns_arr = np.asarray(ns) if np.isscalar(ns) else np.asarray(list(ns))
    try:
        ns_arr = np.broadcast_to(ns_arr, cs_arr.shape)
    except ValueError:
        raise ConfigError(f"ns (shape {ns_arr.shape}) and cs ({cs_arr.shape}) differ") from None
    pairs = zip(ns_arr.tolist(), cs_arr.tolist(), strict=True)
    return np.array([pass_at_k(n, c, k) for n, c in pairs], dtype=np.float64)


def mean_pass_at_k(ns: int | Iterable[int], cs: Iterable[int], k: int) -> float:
    """Benchmark pass@k: the mean of :func:`pass_at_k` over problems (Chen et al. 2021, eq. 1)."""
    scores = pass_at_k_array(ns, cs, k)
    if scores.size == 0:
        raise ConfigError("mean_pass_at_k needs at least one problem")
    return float(scores.mean())


# --- ROUGE-L ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RougeScore:
    """Precision, recall and F-measure of one ROUGE comparison."""

    precision: float
    recall: float
    fmeasure: float


_ROUGE_TOKEN = re.compile(r"[a-z0-9]+")


def rouge_tokenize(text: str) -> list[str]:
    """rouge-score's default tokenisation without stemming: lowercase, keep ``[a-z0-9]+`` runs.

    As in rouge-score, every other character (non-ASCII letters included) is a separator, so
    pass your own ``tokenizer`` to :func:`rouge_l` for non-English text.
    """
    return _ROUGE_TOKEN.findall(text.lower())


def lcs_length(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Length of the longest common subsequence of two token sequences.

    Bit-parallel algorithm (Allison & Dix 1986; Hyyrö 2004): O(len(a) * len(b) / wordsize).
    """
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return 0
    # Bit i of masks[t] is set where a[i] == t; v has a zero bit per LCS element found so far.
    masks: dict[Any, int] = {}
    for i, tok in enumerate(a):
        masks[tok] = masks.get(tok, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for tok in b:
        u = v & masks.get(tok, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def rouge_l(
    prediction: str,
    reference: str,
    *,
    tokenizer: Callable[[str], Sequence[str]] | None = None,
    beta: float = 1.0,
) -> RougeScore:
    """Sentence-level ROUGE-L (Lin 2004, eqs. 2-4) from the LCS of the token sequences.

    ``P = LCS/len(prediction)``, ``R = LCS/len(reference)``,
    ``F = (1 + beta^2) P R / (R + beta^2 P)``. With the default tokenizer and ``beta=1`` this
    equals Google rouge-score's ``rougeL`` (``use_stemmer=False``); an empty side scores 0.
    """
    if beta <= 0:
        raise ConfigError(f"beta must be > 0, got {beta}")
    tok = rouge_tokenize if tokenizer is None else tokenizer
    pred, ref = list(tok(prediction)), list(tok(reference))
    if not pred or not ref:
        return RougeScore(0.0, 0.0, 0.0)
    lcs = lcs_length(pred, ref)
    p, r = lcs / len(pred), lcs / len(ref)
    b2 = beta * beta
    f = (1 + b2) * p * r / (r + b2 * p) if p + r > 0 else 0.0
    return RougeScore(p, r, f)


# --- perplexity ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PerplexityResult:
    """Perplexity ``exp(nll_sum / n_tokens)`` with its parts (natural-log NLL)."""

    ppl: float
    nll_sum: float
    n_tokens: int

    @property
    def mean_nll(self) -> float:
        """Mean negative log-likelihood per scored token (nats)."""
        return self.nll_sum / self.n_tokens


def _sliding_windows(length: int, max_length: int, stride: int) -> list[tuple[int, int, int]]:
    """``(begin, first_scored, end)`` per window; scored ranges tile ``[1, length)`` exactly.

    A window holds ``min(max_length, length)`` tokens and scores ``stride`` new ones (the first
    window scores all but its first token). Scoring token t needs token t-1 in the same window,
    so at most ``max_length - 1`` tokens are new per window.
    """
    step = min(stride, max_length - 1)
    end = min(max_length, length)
    windows = [(0, 1, end)]
    while end < length:
        nxt = min(end + step, length)
        windows.append((nxt - max_length, end, nxt))
        end = nxt
    return windows


def _accepts_kwarg(model: Any, name: str) -> bool:
    try:
        return name in inspect.signature(model.forward).parameters
    except (TypeError, ValueError, AttributeError):
        return False


def _model_device(model: Any) -> torch.device:
    import torch

    device = getattr(model, "device", None)
    if isinstance(device, torch.device):
        return device
    try:
        return next(model.parameters()).device
    except (StopIteration, AttributeError):
        return torch.device("cpu")


def perplexity(
    model: torch.nn.Module,
    input_ids: torch.Tensor | Sequence[int] | np.ndarray,
    *,
    max_length: int | None = None,
    stride: int | None = None,
    batch_size: int = 1,
) -> PerplexityResult:
    """Perplexity of a causal LM on one token stream (or several) with a strided sliding window.

    The Hugging Face "Perplexity of fixed-length models" recipe, with exact token accounting:
    each window holds ``max_length`` tokens (default ``model.config.max_position_embeddings``)
    and scores only the ``stride`` tokens no earlier window scored, conditioned on the rest, so
    every token after the first is scored exactly once (``n_tokens == len(input_ids) - 1``).
    Since a window can score at most ``max_length - 1`` tokens, ``stride == max_length`` (the
    default) means windows overlap by the one context token that needs. Runs under
    ``torch.no_grad`` in eval mode (restored afterwards) on the model's device.

    A 2-D ``input_ids`` of shape ``(rows, length)`` holds independent streams of equal length
    (e.g. the non-overlapping segments of the PTQ papers' WikiText protocol): each row is
    windowed and scored on its own, never conditioned on another, windows from all rows share
    batches, and the NLL is pooled (``n_tokens == rows * (length - 1)``).
    """
    import torch
    import torch.nn.functional as F

    ids = torch.as_tensor(np.asarray(input_ids) if not torch.is_tensor(input_ids) else input_ids)
    rows = ids[None] if ids.ndim == 1 else ids
    if rows.ndim != 2 or rows.shape[0] == 0:
        raise ConfigError(
            f"input_ids must be one token stream (1-D) or independent rows (2-D), got shape "
            f"{tuple(ids.shape)}"
        )
    length = rows.shape[1]
    if length < 2:
        raise ConfigError(f"perplexity needs a stream of at least 2 tokens, got {length}")
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise ConfigError(f"input_ids must be integer token ids, got dtype {ids.dtype}")
    if max_length is None:
        max_length = getattr(getattr(model, "config", None), "max_position_embeddings", None)
        if max_length is None:
            raise ConfigError("max_length not given and model.config.max_position_embeddings unset")
    max_length = _as_int(max_length, "max_length")
    if max_length < 2:
        raise ConfigError(f"max_length must be >= 2, got {max_length}")
    stride = max_length if stride is None else _as_int(stride, "stride")
    if not 0 < stride <= max_length:
        raise ConfigError(f"stride must be in [1, max_length={max_length}], got {stride}")
    batch_size = _as_int(batch_size, "batch_size")
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")

    per_row = _sliding_windows(length, max_length, stride)
    windows = [(r, *w) for r in range(rows.shape[0]) for w in per_row]
    width = per_row[0][2]  # every window has this many tokens: min(max_length, length)
    device = _model_device(model)
    rows = rows.to(device=device, dtype=torch.long)
    extra: dict[str, Any] = {}
    if _accepts_kwarg(model, "use_cache"):
        extra["use_cache"] = False
    trim_logits = _accepts_kwarg(model, "logits_to_keep")

    nll_sum, n_tokens = 0.0, 0
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(windows), batch_size):
                chunk = windows[start : start + batch_size]
                batch = torch.stack([rows[r, b:e] for r, b, _, e in chunk])  # (B, width)
                # Logits needed: positions first-1 .. end-2 of each window, a suffix of it.
                keep = max(e - f for _, _, f, e in chunk) + 1
                kwargs = dict(extra, logits_to_keep=keep) if trim_logits else extra
                out = model(batch, **kwargs)
                logits = getattr(out, "logits", out[0] if isinstance(out, tuple) else out)
                kept = logits.shape[1]  # (B, kept, vocab), the last `kept` positions
                if kept < keep:
                    raise LLMCoreError(f"model returned logits for {kept} of {width} positions")
                total = logits.new_zeros((), dtype=torch.float32)
                for i, (r, _, first, end) in enumerate(chunk):
                    n_new = end - first
                    scores = logits[i, kept - n_new - 1 : kept - 1].float()
                    total = total + F.cross_entropy(scores, rows[r, first:end], reduction="sum")
                    n_tokens += n_new
                nll_sum += float(total.item())
    finally:
        model.train(was_training)

    mean = nll_sum / n_tokens
    ppl = math.exp(mean) if mean < 709.0 else math.inf
    return PerplexityResult(ppl=ppl, nll_sum=nll_sum, n_tokens=n_tokens)


# --- completion scoring ----------------------------------------------------------------------


def _bos_prefix(tokenizer: Any, add_bos: bool | None) -> list[int]:
    """The BOS ids to put before a prompt's tokens: ``[bos]`` unless ``add_bos`` is False."""
    bos = getattr(tokenizer, "bos_token_id", None)
    if add_bos is False:
        return []
    if bos is None:
        if add_bos:
            raise ConfigError(
                "add_bos=True but the tokenizer has no bos_token_id; pass add_bos=False"
            )
        return []
    return [int(bos)]


def _encode(tokenizer: Any, text: str) -> list[int]:
    return [int(t) for t in tokenizer(text, add_special_tokens=False)["input_ids"]]


def completion_token_ids(
    tokenizer: Any,
    pairs: Sequence[tuple[str, str]],
    *,
    add_bos: bool | None = None,
) -> list[tuple[list[int], list[int]]]:
    """``(context_ids, completion_ids)`` per pair, as :func:`completion_logprobs` scores them.

    Prompt and completion are tokenised separately without special tokens, so the completion's
    ids are exactly ``tokenizer(completion, add_special_tokens=False)``. The BOS rule: with
    ``add_bos=None`` (default) or ``True`` the tokenizer's ``bos_token_id`` is prepended to the
    prompt unless the prompt's own ids already start with it (a rendered chat template that
    spells out the BOS); ``None`` silently skips it when the tokenizer has no BOS, ``True`` then
    raises. ``add_bos=False`` scores the raw prompt ids. An empty context (empty prompt and no
    BOS) or an empty completion raises :class:`ConfigError`.
    """
    if isinstance(pairs, str | tuple) and len(pairs) == 2 and isinstance(pairs[0], str):
        raise ConfigError("pairs must be a sequence of (prompt, completion) pairs, got one pair")
    bos = _bos_prefix(tokenizer, add_bos)
    out = []
    for i, pair in enumerate(pairs):
        if not (
            isinstance(pair, Sequence) and len(pair) == 2 and all(isinstance(s, str) for s in pair)
        ):
            raise ConfigError(
                f"pairs[{i}] must be a (prompt, completion) pair of strings, got {pair!r}"
            )
        prompt, completion = pair
        context = _encode(tokenizer, prompt)
        if bos and context[:1] != bos:
            context = bos + context
        target = _encode(tokenizer, completion)
        if not target:
            raise ConfigError(
                f"pairs[{i}] has an empty completion ({completion!r}): nothing to score"
            )
        if not context:
            raise ConfigError(
                f"pairs[{i}] has an empty prompt and no BOS to condition on; give a prompt or "
                "use add_bos=None/True with a tokenizer that has a bos_token_id"
            )
        out.append((context, target))
    return out


def completion_logprobs(
    model: torch.nn.Module,
    tokenizer: Any,
    pairs: Sequence[tuple[str, str]],
    *,
    batch_size: int = 16,
    add_bos: bool | None = None,
    reduce: Literal["sum", "mean"] | None = None,
) -> list[torch.Tensor] | list[float]:
    """Log-probabilities of each completion's tokens given its prompt, under a causal LM.

    ``log p(c_t | bos, prompt, c_<t)`` for every token ``c_t`` of the completion (natural log,
    float32 ``log_softmax`` of the logits, which at position ``t`` predict token ``t + 1``).
    Tokenisation and the BOS rule are those of :func:`completion_token_ids`. Sequences are
    sorted by length, cut into batches of ``batch_size`` and right-padded here (the tokenizer's
    ``padding_side`` is ignored), with an attention mask and explicit positions ``0..len-1``,
    so each result equals running the model on that sequence alone; results come back in the
    order of ``pairs``. Runs under ``torch.no_grad`` in eval mode (restored afterwards) on the
    model's device.

    Returns one 1-D float32 CPU tensor per pair (``reduce=None``), or one float per pair: the
    completion's total log-likelihood (``"sum"``) or its per-token mean (``"mean"``).
    """
    import torch

    if reduce not in (None, "sum", "mean"):
        raise ConfigError(f"reduce={reduce!r} is invalid: expected None, 'sum' or 'mean'")
    batch_size = _as_int(batch_size, "batch_size")
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    encoded = completion_token_ids(tokenizer, pairs, add_bos=add_bos)
    if not encoded:
        return []
    seqs = [ctx + tgt for ctx, tgt in encoded]
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]), reverse=True)
    device = _model_device(model)
    pad = getattr(tokenizer, "pad_token_id", None)
    pad = 0 if pad is None else int(pad)  # any valid id: padded positions are masked and unread
    extra: dict[str, Any] = {}
    if _accepts_kwarg(model, "use_cache"):
        extra["use_cache"] = False
    use_mask = _accepts_kwarg(model, "attention_mask")
    use_pos = _accepts_kwarg(model, "position_ids")
    trim_logits = _accepts_kwarg(model, "logits_to_keep")

    results: list[torch.Tensor | None] = [None] * len(seqs)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(order), batch_size):
                rows = order[start : start + batch_size]
                width = len(seqs[rows[0]])  # sorted longest first
                ids = torch.full((len(rows), width), pad, dtype=torch.long)
                mask = torch.zeros((len(rows), width), dtype=torch.long)
                for r, i in enumerate(rows):
                    ids[r, : len(seqs[i])] = torch.tensor(seqs[i])
                    mask[r, : len(seqs[i])] = 1
                kwargs = dict(extra)
                if use_mask:
                    kwargs["attention_mask"] = mask.to(device)
                if use_pos:
                    kwargs["position_ids"] = torch.arange(width, device=device).expand(
                        len(rows), -1
                    )
                # Logits needed from position len(context) - 1 on: keep that suffix only.
                first = min(len(encoded[i][0]) for i in rows) - 1
                if trim_logits:
                    kwargs["logits_to_keep"] = width - first
                out = model(ids.to(device), **kwargs)
                logits = getattr(out, "logits", out[0] if isinstance(out, tuple) else out)
                offset = width - logits.shape[1]  # position of logits[:, 0]
                if offset > first:
                    raise LLMCoreError(
                        f"model returned logits for {logits.shape[1]} of {width} positions"
                    )
                for r, i in enumerate(rows):
                    ctx, tgt = encoded[i]
                    lo = len(ctx) - 1 - offset
                    scores = torch.log_softmax(logits[r, lo : lo + len(tgt)].float(), dim=-1)
                    target = torch.tensor(tgt, device=scores.device).unsqueeze(1)
                    results[i] = scores.gather(1, target)[:, 0].cpu()
    finally:
        model.train(was_training)

    per_token = [t for t in results if t is not None]
    if reduce == "sum":
        return [float(t.sum()) for t in per_token]
    if reduce == "mean":
        return [float(t.mean()) for t in per_token]
    return per_token


# --- answer matching -------------------------------------------------------------------------

_TRAILING_PUNCT = ".,;:!?"


def normalize_answer(text: str) -> str:
    """Casefold, collapse whitespace and strip surrounding space and trailing ``.,;:!?``."""
    return " ".join(text.casefold().split()).rstrip(_TRAILING_PUNCT + " ")


def exact_match(prediction: str, reference: str, *, normalize: bool = True) -> bool:
    """Exact string match, after :func:`normalize_answer` on both sides unless ``normalize=False``."""
    if normalize:
        return normalize_answer(prediction) == normalize_answer(reference)
    return prediction == reference


# A minus sign only counts when it does not follow an alphanumeric ("5-3" is 5 and 3, not -3).
_SIGN = r"(?:(?<![0-9A-Za-z])[-\u2212])?"
_UINT = r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)"
_UDEC = rf"(?:{_UINT}(?:\.\d+)?|\.\d+)"
# A LaTeX denominator must hold a nonzero digit (\frac{1}{0} is not a fraction, like 1/0).
_NUMBER = re.compile(
    rf"(?P<tex>{_SIGN}\\[dt]?frac\s*"
    rf"(?:\{{\s*(?P<tnum>[-\u2212]?{_UDEC})\s*\}}|(?P<tnum1>\d))\s*"
    rf"(?:\{{\s*(?=[\d,.]*[1-9])(?P<tden>{_UDEC})\s*\}}|(?P<tden1>[1-9])))"
    rf"|(?P<sci>(?P<mant>{_SIGN}{_UDEC})\s*(?:\\times|\\cdot|\u00d7)\s*10\s*\^\s*"
    rf"(?:\{{\s*(?P<exp>[-+\u2212]?\d+)\s*\}}|(?P<exp1>\d)))"
    rf"|(?P<frac>(?<![\d/.]){_SIGN}\d+\s*/\s*0*[1-9]\d*(?!\d|\.\d|\s*/))"
    rf"|(?P<dec>{_SIGN}(?:{_UINT}(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?)"
)


def _to_float(s: str) -> float:
    return float(s.replace("\u2212", "-").replace(",", "").replace(" ", ""))


def extract_number(text: str) -> float | None:
    """The last number in ``text``, or ``None``.

    Handles a leading minus (ASCII or U+2212), decimals, ``,`` thousands separators
    (``1,234.5``), exponents (``1e-3``), LaTeX fractions ``\\frac{a}{b}`` / ``\\dfrac`` /
    ``\\tfrac`` (also ``\\frac12``), scientific notation ``a \\times 10^{k}`` (or ``\\cdot``)
    and simple fractions ``a/b`` with integer parts (``-3/4`` is -0.75) when unambiguous: a
    zero denominator, or a chain such as ``1/2/3``, is not a fraction.
    """
    matches = list(_NUMBER.finditer(text))
    if not matches:
        return None
    last = matches[-1]
    if last.group("tex") is not None:
        num = _to_float(last.group("tnum") or last.group("tnum1"))
        den = _to_float(last.group("tden") or last.group("tden1"))
        value = num / den
        return -value if last.group().lstrip().startswith(("-", "\u2212")) else value
    if last.group("sci") is not None:
        exp = (last.group("exp") or last.group("exp1")).replace("\u2212", "-")
        return _to_float(f"{last.group('mant')}e{int(exp)}")
    s = last.group().replace("\u2212", "-").replace(",", "")
    if last.group("frac") is not None:
        num, den = s.split("/")
        return float(num.strip()) / float(den.strip())
    return float(s)


def numeric_match(
    prediction: str | float,
    reference: str | float,
    *,
    rel_tol: float = 1e-6,
    abs_tol: float = 1e-9,
) -> bool:
    """Whether the last numbers in ``prediction`` and ``reference`` agree (``math.isclose``).

    Strings go through :func:`extract_number`; numbers are used as they are. ``False`` when
    either side holds no number.
    """
    pred = extract_number(prediction) if isinstance(prediction, str) else float(prediction)
    ref = extract_number(reference) if isinstance(reference, str) else float(reference)
    if pred is None or ref is None:
        return False
    return math.isclose(pred, ref, rel_tol=rel_tol, abs_tol=abs_tol)


# --- math answers (LaTeX-aware grading, implemented in llmcore.mathanswer) ---------------------

from llmcore.mathanswer import last_boxed, math_equivalent, normalize_math_answer  # noqa: E402

__all__ += ["last_boxed", "math_equivalent", "normalize_math_answer"]
