"""Membership scores from one forward pass: loss, zlib, lowercase, Min-K%, Min-K%++, reference.

Every score is oriented larger = more member-like (Sec. 2.2 of the paper's setting):

- ``loss``: mean token log-probability (minus the average NLL);
- ``zlib``: ``mean log p / Z`` with ``Z`` the zlib-compressed byte length (Carlini et al. 2021);
- ``lowercase``: ``log ppl(lower(text)) / log ppl(text)``;
- ``mink``: mean of the ``max(1, floor(k T))`` smallest token log-probabilities (Shi et al. 2024);
- ``minkpp``: the same over ``z_t = (log p_t - mu_t) / sigma_t`` with the full-vocabulary mean
  and standard deviation of ``log p`` under the model's next-token distribution (Zhang et al.
  2024);
- ``ref``: ``NLL_ref - NLL_target`` for a reference model.

A text is its tokens without special tokens, after the tokenizer's BOS when it has one, truncated
to ``max_length`` tokens; every token after the first position is scored.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ptdi.errors import PTDIConfigError, PTDIInputError, UnsupportedBackendError

SCORES = ("loss", "zlib", "lowercase", "mink", "minkpp", "ref")
"""Every score name :class:`MembershipScorer` computes."""

BACKEND_SCORES = ("loss", "zlib", "lowercase", "mink")
"""Scores computable from chosen-token log-probabilities alone (any generation backend)."""

ORIENTATION = "higher_is_member"
"""The orientation written to ``scores.meta.json`` for every score of this package."""


def check_k(k: float) -> float:
    """``k`` of Min-K% / Min-K%++ must lie in (0, 1]."""
    if not (np.isfinite(k) and 0 < k <= 1):
        raise PTDIConfigError(f"k must lie in (0, 1], got {k!r} (the papers use 0.2)")
    return float(k)


def check_score_names(scores: Sequence[str], allowed: Sequence[str] = SCORES) -> tuple[str, ...]:
    names = tuple(scores)
    if not names:
        raise PTDIConfigError(f"no score requested; choose from {tuple(allowed)}")
    bad = [s for s in names if s not in allowed]
    if bad:
        raise PTDIConfigError(f"unknown score(s) {bad}; choose from {tuple(allowed)}")
    return names


def min_k_mean(values: np.ndarray, k: float) -> float:
    """Mean of the ``max(1, floor(k T))`` smallest of ``T`` values."""
    t = values.shape[0]
    kk = max(1, int(np.floor(k * t)))
    return float(np.sort(values)[:kk].mean())


def zlib_size(text: str) -> int:
    """Length in bytes of the zlib-compressed UTF-8 text."""
    return len(zlib.compress(text.encode("utf-8")))


def scores_from_token_logprobs(
    logprobs: np.ndarray,
    text: str,
    k: float = 0.2,
    z: np.ndarray | None = None,
    lower_logprobs: np.ndarray | None = None,
) -> dict[str, float]:
    """Scores of one text from its token log-probs (and Min-K%++ ``z_t`` when given)."""
    lp = np.asarray(logprobs, dtype=np.float64)
    mean_lp = float(lp.mean())
    out = {
        "loss": mean_lp,
        "zlib": mean_lp / zlib_size(text),
        "mink": min_k_mean(lp, k),
    }
    if lower_logprobs is not None:
        # log ppl = -mean log p; a ratio of two negatives' magnitudes
        out["lowercase"] = float(-np.mean(lower_logprobs)) / (-mean_lp)
    if z is not None:
        out["minkpp"] = min_k_mean(np.asarray(z, dtype=np.float64), k)
    return out


def _n_text_tokens(tokenizer: Any, text: str, max_length: int) -> int:
    ids = _encode(tokenizer, text, max_length)
    return len(ids) - (getattr(tokenizer, "bos_token_id", None) is not None)


def _encode(tokenizer: Any, text: str, max_length: int) -> list[int]:
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is not None and (not ids or ids[0] != bos):
        ids = [bos, *ids]
    return ids[:max_length]


POST_HEAD_SCALES = ("final_logit_softcapping", "logit_scale", "logits_scaling")
"""Config fields of models whose logits are not the output projection's own output (soft-capping,
scaling): for those the scorer takes the logits from the model's ordinary forward."""


def row_stats(x: Any, targets: Any, *, want_stats: bool) -> tuple[Any, Any]:
    """Log-probs of ``targets`` (R,) under ``(R, V)`` logits rows and, with ``want_stats``,
    Min-K%++'s ``z_t = (log p_t - mu_t) / sigma_t`` (``sigma_t^2`` clamped at 1e-6).

    float32; one exponential of the block: with ``y = x - max x``, ``e = exp(y)``, ``s = sum e``,
    ``log p_t = y_t - log s``, ``mu_t = E_p[y] - log s`` and ``sigma_t^2 = E_p[y^2] - E_p[y]^2``
    (the variance of ``log p`` is shift-free). Works in place on ``x`` when it is float32.
    """
    import torch

    x = x.float()
    tgt = targets.unsqueeze(-1)
    if not want_stats:
        return (x.gather(-1, tgt) - torch.logsumexp(x, dim=-1, keepdim=True))[:, 0], None
    y = x.sub_(x.amax(dim=-1, keepdim=True))
    e = torch.exp(y)
    s = e.sum(dim=-1)
    log_s = s.log()
    lp = y.gather(-1, tgt)[:, 0] - log_s
    ey = torch.linalg.vecdot(e, y) / s  # E_p[y]
    eyy = torch.linalg.vecdot(e.mul_(y), y) / s  # E_p[y^2]
    var = (eyy - ey.square()).clamp_min(1e-6)
    return lp, (lp - (ey - log_s)) / var.sqrt()


def streamed_stats(
    hidden: Any, weight: Any, bias: Any, targets: Any, *, want_stats: bool, vocab_chunk: int
) -> tuple[Any, Any]:
    """:func:`row_stats` of the logits ``hidden @ weight.T + bias`` without forming them:
    the output projection is applied ``vocab_chunk`` vocabulary rows at a time and the
    log-sum-exp and the first two moments of ``log p`` are accumulated online (running max,
    ``S = sum e^y``, ``S1 = sum e^y y``, ``S2 = sum e^y y^2`` with ``y`` the logit minus the
    running max, rescaled when the max grows). ``hidden`` is ``(R, H)``; float32 accumulation.
    """
    import torch
    import torch.nn.functional as F

    r, v = hidden.shape[0], weight.shape[0]
    zeros = torch.zeros(r, dtype=torch.float32, device=hidden.device)
    m = torch.full_like(zeros, -float("inf"))
    s, s1, s2, tgt_logit = zeros, zeros, zeros, zeros
    for v0 in range(0, v, vocab_chunk):
        v1 = min(v, v0 + vocab_chunk)
        x = F.linear(hidden, weight[v0:v1], None if bias is None else bias[v0:v1]).float()
        inside = (targets >= v0) & (targets < v1)
        picked = x.gather(1, (targets - v0).clamp(0, v1 - v0 - 1).unsqueeze(1))[:, 0]
        tgt_logit = torch.where(inside, picked, tgt_logit)
        m_new = torch.maximum(m, x.amax(1))
        if v0 > 0:  # rescale the sums to the new max: y_old = y_new + d, d <= 0
            d = m - m_new
            ed = d.exp()
            if want_stats:
                s2 = ed * (s2 + 2 * d * s1 + d * d * s)
                s1 = ed * (s1 + d * s)
            s = ed * s
        m = m_new
        y = x.sub_(m.unsqueeze(1))
        if not want_stats:
            s = s + y.exp_().sum(1)
            continue
        e = y.exp()
        s = s + e.sum(1)
        s1 = s1 + torch.linalg.vecdot(e, y)  # (a batched bmm is ~4x slower on CPU)
        s2 = s2 + torch.linalg.vecdot(e.mul_(y), y)
    log_s = s.log()
    lp = tgt_logit - m - log_s
    if not want_stats:
        return lp, None
    mean_y = s1 / s  # E_p[y]; log p = y - log S, so mu = E_p[y] - log S
    var = (s2 / s - mean_y.square()).clamp_min(1e-6)
    return lp, (lp - (mean_y - log_s)) / var.sqrt()


def logit_stats(logits: Any, ids: Any, *, want_stats: bool, chunk: int = 128) -> tuple[Any, Any]:
    """From ``(B, L, V)`` logits and ``(B, L)`` ids: ``(B, L-1)`` log-probs of ``ids[:, 1:]``
    and, with ``want_stats``, Min-K%++'s ``z_t`` (:func:`row_stats`), ``chunk`` rows at a time."""
    import torch

    _check_vocab(int(ids.max()), logits.shape[-1])
    b, width = ids.shape
    flat_t = ids[:, 1:].reshape(-1)
    n = flat_t.shape[0]
    bi = torch.arange(b).repeat_interleave(width - 1)
    ti = torch.arange(width - 1).repeat(b)
    lp_all = torch.empty(n, dtype=torch.float32)
    z_all = torch.empty(n, dtype=torch.float32) if want_stats else None
    for r0 in range(0, n, chunk):
        r1 = min(n, r0 + chunk)
        lp, z = row_stats(
            logits[bi[r0:r1], ti[r0:r1]], flat_t[r0:r1].to(logits.device), want_stats=want_stats
        )
        lp_all[r0:r1] = lp.cpu()
        if z_all is not None:
            z_all[r0:r1] = z.cpu()
    shape = (b, width - 1)
    return lp_all.view(shape), None if z_all is None else z_all.view(shape)


def _check_vocab(top: int, vocab: int | None) -> None:
    if vocab is not None and top >= vocab:
        raise PTDIInputError(
            f"token id {top} is outside the model's vocabulary of {vocab}: the tokenizer does "
            "not belong to this model; load the model's own tokenizer"
        )


def plain_output_head(model: Any) -> Any:
    """The model's output projection when its logits are exactly ``head(hidden)``: a plain
    ``torch.nn.Linear``, no soft-capping or logit scaling in the config, not behind an
    offloading hook; else ``None``."""
    import torch

    try:
        head = model.get_output_embeddings()
    except (AttributeError, NotImplementedError):
        return None
    if type(head) is not torch.nn.Linear or hasattr(head, "_hf_hook"):
        return None
    cfg = getattr(model, "config", None)
    if any(getattr(cfg, a, None) not in (None, 1, 1.0) for a in POST_HEAD_SCALES):
        return None
    return head


@contextmanager
def _head_inputs(head: Any):
    """While active, ``head`` records its input and returns an empty ``(..., 0)`` tensor, so
    the model's forward stops at the hidden states fed to the output projection."""
    box: list[Any] = []
    saved = head.__dict__.get("forward")

    def capture(hidden: Any) -> Any:
        box.append(hidden)
        return hidden[..., :0]

    head.forward = capture
    try:
        yield box
    finally:
        if saved is None:
            del head.forward
        else:
            head.forward = saved


def score_logits(logits: Any, ids: Sequence[int], text: str, k: float = 0.2) -> dict[str, float]:
    """Scores of one sequence from its ``(T, V)`` logits and ``T`` token ids (exactness tests,
    precomputed logits): ``loss``, ``zlib``, ``mink``, ``minkpp``."""
    import torch

    lg = torch.as_tensor(np.asarray(logits), dtype=torch.float32).unsqueeze(0)
    t = torch.as_tensor(list(ids), dtype=torch.long).unsqueeze(0)
    lp, z = logit_stats(lg, t, want_stats=True)
    return scores_from_token_logprobs(
        lp[0].double().numpy(), text, check_k(k), z=z[0].double().numpy()
    )


def token_stats(
    model: Any,
    batch: list[list[int]],
    *,
    want_stats: bool,
    row_chunk: int = 256,
    vocab_chunk: int = 2048,
) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """One forward pass over right-padded ``batch``; per sequence the log-probs of tokens
    ``2..T`` and, with ``want_stats``, Min-K%++'s ``z_t`` (:func:`row_stats`).

    The model runs to the hidden states fed to its output projection; the projection is then
    applied to ``row_chunk`` scored positions (padding skipped) by ``vocab_chunk`` vocabulary
    entries at a time (:func:`streamed_stats`), so the ``(B, T, V)`` logits never exist: the
    largest extra blocks are two ``row_chunk x vocab_chunk`` float32 ones. Models whose logits
    are not a plain projection of those states (:func:`plain_output_head`) fall back to their
    own logits, reduced ``row_chunk`` rows at a time (:func:`row_stats`).
    """
    import torch

    device = next(model.parameters()).device
    lengths = [len(s) for s in batch]
    width = max(lengths)
    ids = torch.zeros((len(batch), width), dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for i, s in enumerate(batch):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    pos = torch.arange(width).unsqueeze(0).expand(len(batch), -1)
    _check_vocab(
        max(max(s) for s in batch), getattr(getattr(model, "config", None), "vocab_size", None)
    )
    # scored rows: position t of sequence i predicts ids[i, t + 1] (right padding: contiguous)
    bi, ti = mask[:, 1:].nonzero(as_tuple=True)
    targets = ids[bi, ti + 1].to(device)
    bi, ti = bi.to(device), ti.to(device)
    ids, mask, pos = ids.to(device), mask.to(device), pos.to(device)
    head = plain_output_head(model)
    n = targets.shape[0]
    lp_all = np.empty(n)
    z_all = np.empty(n) if want_stats else None
    if head is not None:
        with _head_inputs(head) as box:
            model(input_ids=ids, attention_mask=mask, position_ids=pos)
        hidden = box[-1]
    else:
        logits = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
    for r0 in range(0, n, row_chunk):
        r1 = min(n, r0 + row_chunk)
        if head is not None:
            lp, z = streamed_stats(
                hidden[bi[r0:r1], ti[r0:r1]], head.weight, head.bias, targets[r0:r1],
                want_stats=want_stats, vocab_chunk=vocab_chunk,
            )  # fmt: skip
        else:
            rows = logits[bi[r0:r1], ti[r0:r1]]
            lp, z = row_stats(rows, targets[r0:r1], want_stats=want_stats)
        lp_all[r0:r1] = lp.double().cpu().numpy()
        if z_all is not None:
            z_all[r0:r1] = z.double().cpu().numpy()
    cuts = np.cumsum([n_i - 1 for n_i in lengths])[:-1]
    lps = np.split(lp_all, cuts)
    zs = np.split(z_all, cuts) if z_all is not None else [None] * len(batch)
    return list(zip(lps, zs, strict=True))


class MembershipScorer:
    """All requested membership scores of a causal LM from one forward pass per batch.

    ``reference_model`` (with ``reference_tokenizer``, default the target's tokenizer) adds
    the ``ref`` score. Works with any Hugging Face causal LM, PEFT-wrapped ones included.
    The vocabulary projection runs on ``row_chunk`` positions by ``vocab_chunk`` vocabulary
    entries at a time (:func:`token_stats`): the full logits are never held.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        scores: Sequence[str] = ("loss", "zlib", "mink", "minkpp"),
        k: float = 0.2,
        max_length: int = 512,
        batch_size: int = 8,
        reference_model: Any = None,
        reference_tokenizer: Any = None,
        row_chunk: int = 256,
        vocab_chunk: int = 2048,
        progress: bool = False,
    ) -> None:
        self.scores = check_score_names(scores)
        self.k = check_k(k)
        if max_length < 2:
            raise PTDIConfigError(f"max_length must be >= 2, got {max_length}")
        if min(batch_size, row_chunk, vocab_chunk) < 1:
            raise PTDIConfigError(
                f"batch_size, row_chunk and vocab_chunk must be >= 1, got {batch_size}, "
                f"{row_chunk}, {vocab_chunk}"
            )
        if "ref" in self.scores and reference_model is None:
            raise PTDIConfigError("the 'ref' score needs a reference model (--reference-model)")
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = int(max_length)
        self.batch_size = int(batch_size)
        self.reference_model = reference_model
        self.reference_tokenizer = reference_tokenizer or tokenizer
        self.row_chunk = int(row_chunk)
        self.vocab_chunk = int(vocab_chunk)
        self.progress = progress

    def encode(self, texts: Sequence[str], tokenizer: Any = None) -> list[list[int]]:
        """Token ids of each text as scored (BOS when the tokenizer has one, truncated)."""
        tok = tokenizer or self.tokenizer
        return [_encode(tok, t, self.max_length) for t in texts]

    def short_indices(self, texts: Sequence[str]) -> list[int]:
        """Indices of texts with fewer than 2 scorable tokens after truncation."""
        idx = set()
        toks = [self.tokenizer] + ([self.reference_tokenizer] if self.reference_model else [])
        for tok in toks:
            for i, t in enumerate(texts):
                if _n_text_tokens(tok, t, self.max_length) < 2:
                    idx.add(i)
                if (
                    "lowercase" in self.scores
                    and _n_text_tokens(tok, t.lower(), self.max_length) < 2
                ):
                    idx.add(i)
        return sorted(idx)

    def token_logprobs(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Log-probs of tokens ``2..T`` of each text under the target model."""
        return [lp for lp, _ in self._run(self.model, self.encode(texts), want_stats=False)]

    def _run(self, model: Any, seqs: list[list[int]], *, want_stats: bool):
        import torch

        order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
        out: list[Any] = [None] * len(seqs)
        was_training = model.training
        model.eval()
        try:
            from tqdm.auto import tqdm

            starts = range(0, len(order), self.batch_size)
            with torch.no_grad():
                for s in tqdm(starts, disable=not self.progress, desc="ptdi score"):
                    idx = order[s : s + self.batch_size]
                    res = token_stats(
                        model, [seqs[i] for i in idx], want_stats=want_stats,
                        row_chunk=self.row_chunk, vocab_chunk=self.vocab_chunk,
                    )  # fmt: skip
                    for i, r in zip(idx, res, strict=True):
                        out[i] = r
        finally:
            model.train(was_training)
        return out

    def score(
        self, texts: Sequence[str], ids: Sequence[Any] | None = None
    ) -> dict[str, np.ndarray]:
        """``{score name: (len(texts),) float64 array}``, member-oriented.

        Texts with fewer than 2 tokens after truncation raise :class:`PTDIInputError` naming
        their ids (drop them first, e.g. with :meth:`short_indices`).
        """
        texts = list(texts)
        if not texts:
            raise PTDIInputError("no texts to score")
        names = list(ids) if ids is not None else list(range(len(texts)))
        short = self.short_indices(texts)
        if short:
            shown = [names[i] for i in short[:20]]
            raise PTDIInputError(
                f"{len(short)} text(s) have fewer than 2 tokens after truncation to "
                f"max_length={self.max_length}: ids {shown}; remove them (CLI: --drop-short)"
            )
        want_lower = "lowercase" in self.scores
        seqs = self.encode(texts)
        n = len(texts)
        if want_lower:
            seqs = seqs + self.encode([t.lower() for t in texts])
        res = self._run(self.model, seqs, want_stats="minkpp" in self.scores)
        out = {s: np.empty(n) for s in self.scores}
        for i, text in enumerate(texts):
            lp, z = res[i]
            sc = scores_from_token_logprobs(
                lp, text, self.k, z=z, lower_logprobs=res[n + i][0] if want_lower else None
            )
            for s in self.scores:
                if s != "ref":
                    out[s][i] = sc[s]
        if "ref" in self.scores:
            ref_seqs = self.encode(texts, self.reference_tokenizer)
            ref = self._run(self.reference_model, ref_seqs, want_stats=False)
            for i in range(n):
                out["ref"][i] = float(res[i][0].mean()) - float(ref[i][0].mean())  # NLL_ref - NLL
        return out


class BackendScorer:
    """``loss``, ``zlib``, ``lowercase`` and ``mink`` from a generation backend's ``score``
    (e.g. llmcore's vLLM backend, which returns prompt log-probs of the chosen tokens only).

    Min-K%++ and ``ref`` need the full next-token distribution or a second model: refused.
    """

    def __init__(self, backend: Any, scores: Sequence[str] = ("loss", "zlib", "mink"), k=0.2):
        names = check_score_names(scores)
        bad = [s for s in names if s not in BACKEND_SCORES]
        if bad:
            raise UnsupportedBackendError(
                f"score(s) {bad} cannot be computed with {type(backend).__name__}: Min-K%++ "
                "needs full-vocabulary statistics and 'ref' a second model; use the Hugging Face "
                f"scorer (MembershipScorer) or choose from {BACKEND_SCORES}"
            )
        self.backend = backend
        self.scores = names
        self.k = check_k(k)

    def score(
        self, texts: Sequence[str], ids: Sequence[Any] | None = None
    ) -> dict[str, np.ndarray]:
        """Member-oriented scores, one pass of ``backend.score`` over ``("", text)`` pairs."""
        texts = list(texts)
        names = list(ids) if ids is not None else list(range(len(texts)))
        pairs = [("", t) for t in texts]
        if "lowercase" in self.scores:
            pairs += [("", t.lower()) for t in texts]
        lps = [np.asarray(x, dtype=np.float64) for x in self.backend.score(pairs)]
        short = [names[i] for i, lp in enumerate(lps) if lp.size < 2]
        if short:
            raise PTDIInputError(f"text(s) with fewer than 2 tokens: ids {short[:20]}")
        n = len(texts)
        out = {s: np.empty(n) for s in self.scores}
        for i, text in enumerate(texts):
            low = lps[n + i] if "lowercase" in self.scores else None
            sc = scores_from_token_logprobs(lps[i], text, self.k, lower_logprobs=low)
            for s in self.scores:
                out[s][i] = sc[s]
        return out


def load_target(
    name_or_path: str,
    *,
    revision: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
    adapter: str | None = None,
    merge_adapter: bool = False,
) -> tuple[Any, Any]:
    """Model and tokenizer through llmcore (safetensors, no remote code); a PEFT ``adapter``
    is attached, or merged into the weights with ``merge_adapter``."""
    from llmcore.models import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(
        name_or_path, revision=revision, device=device, dtype=dtype
    )
    if adapter:
        try:
            from peft import PeftModel
        except ImportError as exc:  # pragma: no cover - depends on the environment
            from llmcore.errors import MissingExtraError

            raise MissingExtraError("PEFT adapters", "peft", package="ptdi") from exc
        model = PeftModel.from_pretrained(model, adapter)
        if merge_adapter:
            model = model.merge_and_unload()
        model.eval()
    return model, tok
