"""Text embeddings for CDS and KATE: sentence-transformers (the paper: ``BAAI/bge-m3``),
mean-pooled hidden states of any HF model (``hf-mean``), an OpenAI-compatible ``/embeddings``
endpoint, and a deterministic hashed bag-of-words (``hash``, offline). All return float64."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from cds_icl.errors import CDSInputError, OfflineEncoderError, unknown_choice

BACKENDS = ("st", "hf-mean", "openai", "hash")
HASH_DIM = 512


def parse_embed_spec(spec: str) -> tuple[str, str | None]:
    """``"st:BAAI/bge-m3"`` -> ``("st", "BAAI/bge-m3")``; ``"hash"`` -> ``("hash", None)``."""
    backend, _, model = spec.partition(":")
    if backend not in BACKENDS:
        raise unknown_choice("embed backend", backend, BACKENDS)
    return backend, model or None


def hash_embed(texts: Sequence[str], dim: int = HASH_DIM) -> np.ndarray:
    """Signed hashed bag of words and word bigrams (blake2b buckets), float64, ``(n, dim)``."""
    out = np.zeros((len(texts), dim))
    for r, t in enumerate(texts):
        words = re.findall(r"\w+|[^\w\s]", t.lower())
        feats = words + [a + " " + b for a, b in itertools.pairwise(words)]
        for f in feats:
            h = hashlib.blake2b(f.encode(), digest_size=8).digest()
            v = int.from_bytes(h, "little")
            out[r, v % dim] += 1.0 if (v >> 32) & 1 else -1.0
    return out


def hf_mean_embed(
    texts: Sequence[str],
    model: Any,
    tokenizer: Any = None,
    device: str = "cpu",
    batch_size: int = 16,
    max_length: int | None = None,
) -> np.ndarray:
    """Mean over non-pad positions of the last hidden state of ``model`` (an id/path or a
    loaded model; decoders and encoders alike)."""
    import torch

    if isinstance(model, str):
        from llmcore.models import load_model_and_tokenizer

        model, tokenizer = load_model_and_tokenizer(model, device=device, dtype="float32")
    if tokenizer is None:
        raise CDSInputError("hf-mean with a loaded model needs its tokenizer")
    dev = next(model.parameters()).device
    rows = []
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    for s in range(0, len(texts), batch_size):
        enc = [
            tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts[s : s + batch_size]
        ]
        if max_length:
            enc = [e[:max_length] for e in enc]
        T = max(max(len(e) for e in enc), 1)
        ids = torch.full((len(enc), T), pad, dtype=torch.long)
        att = torch.zeros((len(enc), T), dtype=torch.long)
        for i, e in enumerate(enc):
            ids[i, : len(e)] = torch.tensor(e, dtype=torch.long)
            att[i, : len(e)] = 1
        with torch.no_grad():
            out = model(
                input_ids=ids.to(dev), attention_mask=att.to(dev), output_hidden_states=True
            )
        h = out.hidden_states[-1].double()
        m = att.to(dev).unsqueeze(-1).double()
        rows.append(((h * m).sum(1) / m.sum(1).clamp(min=1)).cpu().numpy())
    return np.concatenate(rows, axis=0)


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


def _hf_cached(model: str) -> bool:
    home = os.environ.get("HF_HOME", os.path.join(os.path.expanduser("~"), ".cache", "huggingface"))
    hub = os.environ.get("HF_HUB_CACHE", os.path.join(home, "hub"))
    return os.path.isdir(os.path.join(hub, "models--" + model.replace("/", "--")))


def st_embed(
    texts: Sequence[str], model: str, device: str = "cpu", batch_size: int = 16
) -> np.ndarray:
    """sentence-transformers (extra ``st``) with its own normalisation off (done by caller)."""
    if _offline() and not os.path.isdir(model) and not _hf_cached(model):
        raise OfflineEncoderError(
            f"sentence-transformers model {model!r} is not in the local Hugging Face cache and "
            "HF_HUB_OFFLINE is set; use a local path, 'hf-mean:<local model path>' or 'hash'"
        )
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as e:  # pragma: no cover - depends on the extra
        raise CDSInputError(
            "the 'st' embed backend needs sentence-transformers: pip install 'cds-icl[st]'"
        ) from e
    try:
        enc = SentenceTransformer(model, device=device)
    except OSError as e:
        raise OfflineEncoderError(
            f"cannot load sentence-transformers model {model!r} ({e.__class__.__name__}); offline? "
            "use a local path, 'hf-mean:<local model path>' or 'hash'"
        ) from e
    return np.asarray(enc.encode(list(texts), batch_size=batch_size), dtype=np.float64)


def openai_embed(
    texts: Sequence[str],
    model: str,
    base_url: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    timeout: float = 30.0,
    batch_size: int = 64,
) -> np.ndarray:
    """POST ``{model, input}`` to ``<base_url>/embeddings`` (stdlib HTTP, OpenAI-compatible)."""
    import urllib.error
    import urllib.request

    url = (base_url or os.environ.get("OPENAI_BASE_URL", "http://localhost:8000/v1")).rstrip("/")
    key = os.environ.get(api_key_env, "EMPTY")
    rows: list[list[float]] = []
    for s in range(0, len(texts), batch_size):
        body = json.dumps({"model": model, "input": list(texts[s : s + batch_size])}).encode()
        req = urllib.request.Request(
            url + "/embeddings",
            data=body,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                data = json.loads(r.read())
        except (urllib.error.URLError, OSError) as e:
            raise OfflineEncoderError(
                f"embedding endpoint {url}/embeddings is unreachable ({e}); start the server or "
                "use 'hf-mean:<local model path>' or 'hash' offline"
            ) from e
        items = sorted(data["data"], key=lambda d: d["index"])
        rows.extend(d["embedding"] for d in items)
    return np.asarray(rows, dtype=np.float64)


def embed(
    texts: Sequence[str],
    backend: str = "hash",
    model: Any = None,
    device: str = "cpu",
    normalize: bool = True,
    tokenizer: Any = None,
    base_url: str | None = None,
) -> np.ndarray:
    """Embed ``texts`` with ``backend`` (``st``, ``hf-mean``, ``openai``, ``hash``) as a float64
    ``(n, dim)`` array, L2-normalised rows when ``normalize`` (as the paper's encoder)."""
    if backend not in BACKENDS:
        raise unknown_choice("embed backend", backend, BACKENDS)
    texts = list(texts)
    if backend == "hash":
        E = hash_embed(texts)
    elif backend == "hf-mean":
        if model is None:
            raise CDSInputError("hf-mean needs model= (a hub id, local path or loaded model)")
        E = hf_mean_embed(texts, model, tokenizer, device=device)
    elif backend == "st":
        E = st_embed(texts, model or "BAAI/bge-m3", device=device)
    else:
        if not model:
            raise CDSInputError("openai embeddings need model= (the served model name)")
        E = openai_embed(texts, model, base_url=base_url)
    if normalize:
        nrm = np.linalg.norm(E, axis=1, keepdims=True)
        E = np.divide(E, nrm, out=np.zeros_like(E), where=nrm > 0)
    return E


class Embedder:
    """A reusable ``texts -> float64 array`` callable (what KATE/CDS selectors take)."""

    def __init__(self, backend: str = "hash", model: Any = None, tokenizer: Any = None,
                 device: str = "cpu", normalize: bool = True, base_url: str | None = None) -> None:  # fmt: skip
        if backend not in BACKENDS:
            raise unknown_choice("embed backend", backend, BACKENDS)
        self.backend, self.model, self.tokenizer = backend, model, tokenizer
        self.device, self.normalize, self.base_url = device, normalize, base_url

    @property
    def name(self) -> str:
        m = self.model if isinstance(self.model, str) else type(self.model).__name__
        return self.backend if self.model is None else f"{self.backend}:{m}"

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return embed(texts, self.backend, self.model, self.device, self.normalize,
                     self.tokenizer, self.base_url)  # fmt: skip
