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


def logit_stats(logits: Any, ids: Any, *, want_stats: bool, chunk: int = 128) -> tuple[Any, Any]:
    """From ``(B, L, V)`` logits and ``(B, L)`` ids: ``(B, L-1)`` log-probs of ``ids[:, 1:]``
    and, with ``want_stats``, Min-K%++'s ``z_t = (log p_t - mu_t) / sigma_t`` (``sigma_t^2``
    clamped at 1e-6), from a float32 log-softmax over ``chunk`` positions at a time."""
    import torch

    vocab = logits.shape[-1]
    top = int(ids.max())
    if top >= vocab:
        raise PTDIInputError(
            f"token id {top} is outside the model's vocabulary of {vocab}: the tokenizer does "
            "not belong to this model; load the model's own tokenizer"
        )
    width = ids.shape[1]
    targets = ids[:, 1:]
    lp_all = torch.empty(targets.shape, dtype=torch.float32, device=logits.device)
    z_all = torch.empty_like(lp_all) if want_stats else None
    for t0 in range(0, width - 1, chunk):
        t1 = min(width - 1, t0 + chunk)
        x = logits[:, t0:t1].float()  # (B, C, V)
        tgt = targets[:, t0:t1].unsqueeze(-1)
        if z_all is None:
            lp_all[:, t0:t1] = (x.gather(-1, tgt) - torch.logsumexp(x, dim=-1, keepdim=True))[
                ..., 0
            ]
            continue
        block = torch.log_softmax(x, dim=-1)
        tok_lp = block.gather(-1, tgt).squeeze(-1)
        lp_all[:, t0:t1] = tok_lp
        probs = block.exp()
        mu = (probs * block).sum(-1)
        var = ((probs * block.square()).sum(-1) - mu.square()).clamp_min(1e-6)
        z_all[:, t0:t1] = (tok_lp - mu) / var.sqrt()
        del block
    return lp_all, z_all


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
    chunk: int = 128,
) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """One forward pass over right-padded ``batch``; per sequence the log-probs of tokens
    ``2..T`` and, with ``want_stats``, Min-K%++'s ``z_t`` from a log-softmax over the full
    vocabulary computed ``chunk`` positions at a time (peak extra memory B x chunk x V)."""
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
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    top = max(max(s) for s in batch)
    if vocab is not None and top >= vocab:
        raise PTDIInputError(
            f"token id {top} is outside the model's vocabulary of {vocab}: the tokenizer does "
            "not belong to this model; load the model's own tokenizer"
        )
    ids, mask, pos = ids.to(device), mask.to(device), pos.to(device)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
    lp_all, z_all = logit_stats(logits, ids, want_stats=want_stats, chunk=chunk)
    out = []
    for i, n in enumerate(lengths):
        lp = lp_all[i, : n - 1].double().cpu().numpy()
        z = z_all[i, : n - 1].double().cpu().numpy() if z_all is not None else None
        out.append((lp, z))
    return out


class MembershipScorer:
    """All requested membership scores of a causal LM from one forward pass per batch.

    ``reference_model`` (with ``reference_tokenizer``, default the target's tokenizer) adds
    the ``ref`` score. Works with any Hugging Face causal LM, PEFT-wrapped ones included.
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
        vocab_chunk: int = 128,
        progress: bool = False,
    ) -> None:
        self.scores = check_score_names(scores)
        self.k = check_k(k)
        if max_length < 2:
            raise PTDIConfigError(f"max_length must be >= 2, got {max_length}")
        if batch_size < 1 or vocab_chunk < 1:
            raise PTDIConfigError("batch_size and vocab_chunk must be >= 1")
        if "ref" in self.scores and reference_model is None:
            raise PTDIConfigError("the 'ref' score needs a reference model (--reference-model)")
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = int(max_length)
        self.batch_size = int(batch_size)
        self.reference_model = reference_model
        self.reference_tokenizer = reference_tokenizer or tokenizer
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
                        chunk=self.vocab_chunk,
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
