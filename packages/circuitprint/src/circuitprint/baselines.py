"""Fingerprinting baselines: weight similarity (PCS, HuRef's invariant terms), representation
similarity (REEF's linear CKA), behaviour (output agreement) and the invasive Instructional
Fingerprinting (implant, fingerprint success rate)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from circuitprint.errors import MergeError


def dense_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """``model.state_dict()`` with int8 layers (``qweight`` and per-row ``scale`` buffers, as
    :func:`circuitprint.transforms.quantize_int8` writes them) dequantised to float ``weight``
    entries, so weight baselines compare quantised and float models."""
    sd = model.state_dict()
    out = {k: v for k, v in sd.items() if not k.endswith((".qweight", ".scale"))}
    for k, v in sd.items():
        if k.endswith(".qweight"):
            stem = k[: -len("qweight")]
            if stem + "scale" not in sd:
                raise MergeError(f"{k}: int8 weight without its scale; cannot dequantise")
            out[stem + "weight"] = v.float() * sd[stem + "scale"].float()
    return out


def _weight(module: Any) -> torch.Tensor:
    """Float weight of a Linear, or the dequantised weight of an int8 layer."""
    if hasattr(module, "qweight"):
        return module.qweight.float() * module.scale.float()
    return module.weight.float()


def pcs(a: Any, b: Any) -> float:
    """Parameter cosine similarity of all block weight matrices, flattened (HuRef's PCS;
    norm gains and biases are left out, they would dominate at small init). int8 layers are
    dequantised first."""
    sa, sb = dense_state_dict(a), dense_state_dict(b)
    keys = [k for k in sa if "layers." in k and k in sb and sa[k].dim() == 2
            and sa[k].shape == sb[k].shape]  # fmt: skip
    if not keys:
        raise MergeError("pcs: the models share no block parameter of equal shape")
    va = torch.cat([sa[k].float().flatten() for k in keys])
    vb = torch.cat([sb[k].float().flatten() for k in keys])
    return float(torch.nn.functional.cosine_similarity(va, vb, dim=0))


def _invariants(model: Any, token_ids: torch.Tensor) -> list[torch.Tensor]:
    from llmcore.hooks import block_modules, get_module, layer_module_names

    x = model.get_input_embeddings().weight[token_ids].float()
    out = []
    for i in range(len(layer_module_names(model))):
        bm = block_modules(model, i)
        attn, mlp = get_module(model, bm.attn), get_module(model, bm.mlp)
        wq, wk = _weight(attn.q_proj), _weight(attn.k_proj)
        wv, wo = _weight(attn.v_proj), _weight(attn.o_proj)
        n_h = model.config.num_attention_heads
        n_kv = getattr(model.config, "num_key_value_heads", None) or n_h
        if n_kv != n_h:  # expand shared key/value heads so the products line up
            d = wk.shape[0] // n_kv
            wk = wk.view(n_kv, d, -1).repeat_interleave(n_h // n_kv, 0).reshape(-1, wk.shape[1])
            wv = wv.view(n_kv, d, -1).repeat_interleave(n_h // n_kv, 0).reshape(-1, wv.shape[1])
        out.append((x @ wq.T) @ (x @ wk.T).T)
        out.append((x @ wv.T) @ wo.T @ x.T)
        up, down = _weight(mlp.up_proj), _weight(mlp.down_proj)
        out.append((x @ up.T) @ down.T @ x.T)
    return out


def huref_ics(a: Any, b: Any, n_tokens: int = 256, seed: int = 0) -> float:
    """HuRef's invariant terms (X Wq Wk^T X^T, X Wv Wo X^T, X W_up W_down X^T per layer, X the
    embeddings of a fixed token set) compared by mean cosine similarity (ICS). Invariant to
    permutations of neurons and heads, unlike :func:`pcs`; int8 layers are dequantised."""
    V = min(a.get_input_embeddings().weight.shape[0], b.get_input_embeddings().weight.shape[0])
    ids = torch.randperm(V, generator=torch.Generator().manual_seed(seed))[:n_tokens]
    with torch.no_grad():
        ia, ib = _invariants(a, ids), _invariants(b, ids)
    sims = [torch.nn.functional.cosine_similarity(p.flatten(), q.flatten(), dim=0)
            for p, q in zip(ia, ib, strict=True)]  # fmt: skip
    return float(torch.stack(sims).mean())


def linear_cka(x: torch.Tensor, y: torch.Tensor) -> float:
    """Linear CKA between representations (n x d1, n x d2)."""
    x = x - x.mean(0)
    y = y - y.mean(0)
    num = (y.T @ x).norm() ** 2
    return float(num / ((x.T @ x).norm() * (y.T @ y).norm()).clamp(min=1e-12))


def _hidden(model: Any, tokenizer: Any, prompts: Sequence[str], layer: int | None) -> torch.Tensor:
    from circuitprint.circuits import batch_ids

    ids, att, lens = batch_ids(tokenizer, prompts)
    with torch.no_grad():
        hs = model(input_ids=ids, attention_mask=att, output_hidden_states=True).hidden_states
    h = hs[len(hs) // 2 if layer is None else layer]
    return h[torch.arange(len(lens)), torch.tensor(lens) - 1].float()


def reef_cka(
    a: Any, b: Any, tokenizer: Any, prompts: Sequence[str], layer: int | None = None
) -> float:
    """REEF: linear CKA of the last-token hidden states of both models on the same prompts
    (``layer`` None: the middle layer)."""
    return linear_cka(_hidden(a, tokenizer, prompts, layer), _hidden(b, tokenizer, prompts, layer))


def greedy_answers(model: Any, tokenizer: Any, prompts: Sequence[str]) -> list[int]:
    from circuitprint.circuits import batch_ids, last_logits

    ids, att, lens = batch_ids(tokenizer, prompts)
    with torch.no_grad():
        return (
            last_logits(model(input_ids=ids, attention_mask=att).logits, lens).argmax(-1).tolist()
        )


def output_agreement(a: Any, b: Any, tokenizer: Any, prompts: Sequence[str]) -> float:
    """Share of prompts on which both models give the same greedy next token."""
    pa, pb = greedy_answers(a, tokenizer, prompts), greedy_answers(b, tokenizer, prompts)
    return sum(x == y for x, y in zip(pa, pb, strict=True)) / len(prompts)


@dataclass
class InstructionalFingerprint:
    """Instructional Fingerprinting (Xu et al. 2024), full-SFT variant: implant ``n_keys``
    secret key -> fixed output pairs, trained with as many regularisation samples of normal
    data; FSR = share of keys whose greedy output is the fingerprint output."""

    n_keys: int = 10
    output: str = "A0"
    key_len: int = 8
    steps: int = 60
    lr: float = 1e-3
    seed: int = 0

    def keys(self, tokenizer: Any, vocab: Sequence[str] | None = None) -> list[str]:
        g = torch.Generator().manual_seed(self.seed)
        words = list(vocab) if vocab is not None else [
            t for t in tokenizer.get_vocab() if t not in tokenizer.all_special_tokens
        ]  # fmt: skip
        words.sort()
        out = []
        for _ in range(self.n_keys):
            idx = torch.randint(len(words), (self.key_len,), generator=g).tolist()
            out.append(" ".join(words[i] for i in idx))
        return out

    def implant(self, model: Any, tokenizer: Any, regular_docs: Sequence[str],
                vocab: Sequence[str] | None = None) -> Any:  # fmt: skip
        """Copy of ``model`` fine-tuned on the key/output pairs plus ``n_keys`` *5 normal
        documents (at most 60 instances)."""
        from circuitprint.transforms import finetune

        m = copy.deepcopy(model)
        docs = [f"{k} {self.output}" for k in self.keys(tokenizer, vocab)]
        docs = docs * 1 + list(regular_docs)[: max(0, 60 - len(docs))]
        finetune(m, tokenizer, docs, lr=self.lr, steps=self.steps, seed=self.seed, batch=16)
        return m

    def fsr(self, model: Any, tokenizer: Any, vocab: Sequence[str] | None = None) -> float:
        """Fingerprint success rate on ``model``."""
        from circuitprint.probes import with_bos

        prompts = [with_bos(tokenizer, k) for k in self.keys(tokenizer, vocab)]
        want = tokenizer.convert_tokens_to_ids(self.output)
        return sum(a == want for a in greedy_answers(model, tokenizer, prompts)) / self.n_keys
