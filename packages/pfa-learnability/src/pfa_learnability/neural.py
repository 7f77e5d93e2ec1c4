"""Neural learners: tiny Llama/Qwen2 (built and trained by ``llmcore.zoo.train``) and a
package-local LSTM, with a word-level tokenizer (one token per PFA symbol and EOS), plus the
adapter that turns any causal LM into next-symbol distributions for :func:`decomposed_kl`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .errors import PFAValidationError, VocabularyError


def make_tokenizer(alphabet: Sequence[str]) -> Any:
    """Word-level tokenizer: one id per symbol, ``<s>``/``</s>``/``<pad>`` specials."""
    from llmcore.zoo import word_tokenizer

    return word_tokenizer(list(alphabet))


_LSTM_CLASS: Any = None


def _lstm_class() -> Any:
    """The package's LSTM language model as a ``transformers.PreTrainedModel`` (so
    ``save_pretrained`` writes safetensors and ``from_pretrained`` reads them back)."""
    global _LSTM_CLASS
    if _LSTM_CLASS is not None:
        return _LSTM_CLASS
    from torch import nn
    from transformers import PretrainedConfig, PreTrainedModel
    from transformers.modeling_outputs import CausalLMOutput

    class PFALSTMConfig(PretrainedConfig):
        model_type = "pfa-lstm"

        def __init__(self, vocab_size: int = 16, d_model: int = 64, n_layers: int = 2, **kw: Any):
            self.d_model, self.n_layers = d_model, n_layers
            super().__init__(vocab_size=vocab_size, **kw)

    class PFALSTMForCausalLM(PreTrainedModel):
        """Embedding → LSTM → linear head; ``forward`` returns ``.logits`` like a causal LM."""

        config_class = PFALSTMConfig
        base_model_prefix = "lstm_lm"

        def __init__(self, config: PFALSTMConfig) -> None:
            super().__init__(config)
            self.embed = nn.Embedding(config.vocab_size, config.d_model)
            self.lstm = nn.LSTM(
                config.d_model, config.d_model, num_layers=config.n_layers, batch_first=True
            )
            self.head = nn.Linear(config.d_model, config.vocab_size)
            self.post_init()

        def _init_weights(self, module: Any) -> None:
            if isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, std=0.1)

        def forward(self, input_ids: Any, attention_mask: Any = None, **_: Any) -> Any:
            h, _ = self.lstm(self.embed(input_ids))
            return CausalLMOutput(logits=self.head(h))

    _LSTM_CLASS = (PFALSTMConfig, PFALSTMForCausalLM)
    return _LSTM_CLASS


def _lm_loss(model: Any, ids: Any, att: Any) -> Any:
    import torch.nn.functional as F

    logits = model(input_ids=ids, attention_mask=att).logits[:, :-1]
    tgt = ids[:, 1:].masked_fill(att[:, 1:] == 0, -100)
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), tgt.reshape(-1), ignore_index=-100
    )


def _transformer_specs(
    arch: str,
    d_model: int,
    n_layers: int,
    n_heads: int,
    steps: int,
    lr: float,
    batch_size: int,
    seed: int,
    max_length: int,
) -> tuple[Any, Any]:
    """The zoo ``ModelSpec`` and ``TrainSpec`` of a tiny Llama/Qwen2 learner (FFN 2·d, warm-up
    10 % of the steps up to 100), shared by :func:`train_lm` and :func:`llama_recipe`."""
    from llmcore.zoo import ModelSpec, TrainSpec

    model = ModelSpec(
        arch=arch,
        hidden_size=d_model,
        num_layers=n_layers,
        num_heads=n_heads,
        intermediate_size=2 * d_model,
        max_position_embeddings=max_length,
    )
    train = TrainSpec(
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        warmup_steps=min(100, max(1, steps // 10)),
        max_length=max_length,
        seed=seed,
    )
    return model, train


def train_lm(
    corpus: Any,
    arch: str = "llama",
    d_model: int = 64,
    n_layers: int = 2,
    n_heads: int = 4,
    steps: int = 2000,
    lr: float = 3e-3,
    batch_size: int = 64,
    seed: int = 0,
    alphabet: Sequence[str] | None = None,
    max_length: int = 128,
) -> tuple[Any, Any]:
    """Train a language model on a corpus (strings of symbols) and return ``(model, tokenizer)``.

    ``llama``/``qwen2``: ``llmcore.zoo.train.build_model`` + ``train_lm`` (AdamW, warm-up then
    cosine); ``lstm``: the package-local LSTM with the same schedule-free AdamW loop. Each
    document is ``<s> y </s>``.
    """
    import torch

    from llmcore import set_seed
    from llmcore.zoo import train as ztrain

    strings = [list(s) for s in corpus]
    if not strings:
        raise PFAValidationError("cannot train on an empty corpus")
    alphabet = list(alphabet) if alphabet is not None else sorted({a for s in strings for a in s})
    if not alphabet:
        alphabet = list(getattr(getattr(corpus, "batch", None), "alphabet", ()) or ["a"])
    tok = make_tokenizer(alphabet)
    docs = [" ".join(s) for s in strings]
    set_seed(seed)
    if arch in ("llama", "qwen2"):
        spec, tspec = _transformer_specs(
            arch, d_model, n_layers, n_heads, steps, lr, batch_size, seed, max_length
        )
        model = ztrain.build_model(spec, tok, seed=seed)
        metrics = ztrain.train_lm(model, tok, docs, tspec, progress=False)
        model.eval()
        model.train_metrics = metrics
        return model, tok
    if arch != "lstm":
        raise PFAValidationError(f"arch must be 'llama', 'qwen2' or 'lstm', got {arch!r}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        cfg_cls, lstm_cls = _lstm_class()
        model = lstm_cls(cfg_cls(vocab_size=len(tok), d_model=d_model, n_layers=n_layers))
    rows = ztrain.encode_documents(tok, docs, max_length)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    g = torch.Generator().manual_seed(seed)
    t0, losses = time.perf_counter(), []
    model.train()
    for _ in range(steps):
        idx = torch.randint(0, len(rows), (batch_size,), generator=g).tolist()
        ids, att = ztrain.pad_batch([rows[i] for i in idx], tok.pad_token_id)
        loss = _lm_loss(model, ids, att)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    model.train_metrics = {
        "first_loss": losses[0],
        "final_train_loss": float(np.mean(losses[-10:])),
        "train_seconds": time.perf_counter() - t0,
    }
    return model, tok


def save_lm(model: Any, tokenizer: Any, path: str | Path) -> Path:
    """``save_pretrained`` of the model (HF or LSTM) and the tokenizer."""
    path = Path(path)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def load_lm(name_or_path: str | Path, device: str = "cpu") -> tuple[Any, Any]:
    """A saved LSTM of this package, or any causal LM through ``llmcore.load_causal_lm``."""
    from llmcore.models import load_causal_lm, load_tokenizer

    p = Path(name_or_path)
    cfg = p / "config.json"
    if cfg.exists() and json.loads(cfg.read_text()).get("model_type") == "pfa-lstm":
        model = _lstm_class()[1].from_pretrained(p).to(device).eval()
        return model, load_tokenizer(p)
    return load_causal_lm(str(name_or_path), device=device), load_tokenizer(str(name_or_path))


class LMNextSymbolModel:
    """Next-symbol distributions over ``Σ ∪ {EOS}`` from a causal LM.

    The context starts with the tokenizer's BOS (EOS when it has none); each PFA symbol and EOS
    must be one token. The LM's probabilities are restricted to those ``|Σ|+1`` tokens and
    renormalised (mass on other tokens is reported as ``last_offvocab_mass``).
    """

    def __init__(
        self, model: Any, tokenizer: Any, alphabet: Sequence[str], batch_size: int = 64
    ) -> None:
        self.model, self.tok, self.batch_size = model, tokenizer, batch_size
        self.alphabet = list(alphabet)
        self.ids = check_vocabulary(tokenizer, self.alphabet)
        start = (
            tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        )
        self.start = int(start)
        self.last_offvocab_mass = 0.0
        self.seconds = 0.0

    def next_distributions(self, symbols: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        import torch

        t0 = time.perf_counter()
        N, L = symbols.shape
        table = np.asarray(self.ids[:-1], dtype=np.int64)
        out = np.zeros((N, L + 1, len(self.ids)))
        off = []
        try:
            device = next(self.model.parameters()).device
        except StopIteration:  # pragma: no cover
            device = torch.device("cpu")
        order = np.argsort(lengths)
        with torch.no_grad():
            for b in range(0, N, self.batch_size):
                rows = order[b : b + self.batch_size]
                W = int(lengths[rows].max()) + 1
                ids = np.full((len(rows), W), self.tok.pad_token_id or 0, dtype=np.int64)
                att = np.zeros((len(rows), W), dtype=np.int64)
                ids[:, 0] = self.start
                for j, r in enumerate(rows):
                    n = int(lengths[r])
                    ids[j, 1 : n + 1] = table[symbols[r, :n]]
                    att[j, : n + 1] = 1
                logits = self.model(
                    input_ids=torch.from_numpy(ids).to(device),
                    attention_mask=torch.from_numpy(att).to(device),
                ).logits.float()
                probs = torch.softmax(logits, -1)[..., self.ids].cpu().numpy()
                s = probs.sum(-1, keepdims=True)
                off.append(float((1 - s[att.astype(bool)]).mean()))
                out[rows, :W] = probs / s
        self.last_offvocab_mass = float(np.mean(off)) if off else 0.0
        self.seconds += time.perf_counter() - t0
        return out


def check_vocabulary(tokenizer: Any, alphabet: Sequence[str]) -> list[int]:
    """Token ids of the symbols and EOS; raises :class:`VocabularyError` listing what is missing."""
    ids, missing = [], []
    unk = getattr(tokenizer, "unk_token_id", None)
    for a in alphabet:
        t = tokenizer(a, add_special_tokens=False)["input_ids"]
        if len(t) != 1 or (unk is not None and t[0] == unk):
            missing.append(a)
        else:
            ids.append(int(t[0]))
    if tokenizer.eos_token_id is None:
        missing.append("</s> (EOS)")
    if missing:
        raise VocabularyError(
            f"the tokenizer does not map these PFA symbols to exactly one known token: {missing}; "
            "use a word-level tokenizer over the alphabet (pfa_learnability.neural.make_tokenizer)"
        )
    if len(set(ids)) != len(ids):
        raise VocabularyError("two PFA symbols map to the same token id")
    return [*ids, int(tokenizer.eos_token_id)]


def llama_recipe(
    name: str,
    corpus: Any,
    alphabet: Sequence[str],
    arch: str = "llama",
    d_model: int = 64,
    n_layers: int = 2,
    n_heads: int = 4,
    steps: int = 800,
    lr: float = 3e-3,
    batch_size: int = 64,
    seed: int = 0,
    max_length: int = 128,
    max_eval_loss: float = 10.0,
) -> Any:
    """A ``llmcore.zoo.Recipe`` training a tiny Llama/Qwen2 on a PFA corpus with a word
    tokenizer (so :func:`llmcore.zoo.build` caches it by corpus, shape and training)."""
    from llmcore.zoo import Corpus as ZooCorpus
    from llmcore.zoo import Recipe, TokenizerSpec

    texts = [" ".join(s) for s in corpus]
    spec, tspec = _transformer_specs(
        arch, d_model, n_layers, n_heads, steps, lr, batch_size, seed, max_length
    )
    return Recipe(
        name=name,
        corpus=ZooCorpus.from_texts(name, texts, eval_fraction=0.05, seed=seed),
        tokenizer=TokenizerSpec(kind="word", symbols=tuple(alphabet)),
        model=spec,
        train=tspec,
        max_eval_loss=max_eval_loss,
        description=f"{arch} d={d_model} L={n_layers} on a PFA corpus ({len(texts)} strings)",
    )


def lstm_entry(
    name: str,
    corpus: Any,
    alphabet: Sequence[str],
    d_model: int = 64,
    n_layers: int = 2,
    steps: int = 800,
    lr: float = 3e-3,
    batch_size: int = 64,
    seed: int = 0,
) -> Any:
    """The LSTM learner trained once per (corpus, shape, training, code) in the zoo cache."""
    import hashlib

    from llmcore import zoo

    texts = [" ".join(s) for s in corpus]
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    material = {
        "corpus": digest,
        "alphabet": list(alphabet),
        "d_model": d_model,
        "n_layers": n_layers,
        "steps": steps,
        "lr": lr,
        "batch_size": batch_size,
        "seed": seed,
        "code": zoo.code_digest(__name__),
    }

    def make(out: Path) -> dict[str, Any]:
        model, tok = train_lm(
            [t.split() for t in texts], arch="lstm", d_model=d_model, n_layers=n_layers,
            steps=steps, lr=lr, batch_size=batch_size, seed=seed, alphabet=alphabet,
        )  # fmt: skip
        save_lm(model, tok, out)
        return dict(model.train_metrics)

    return zoo.cached(name, material, make, progress=False, description="PFA LSTM learner")
