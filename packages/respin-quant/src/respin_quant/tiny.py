"""The tiny pre-trained model with activation outliers.

A 4-layer Llama (hidden 128, 4 heads, FFN 256, vocab 32) is pre-trained on a sparse order-2
Markov source and cached in llmcore's zoo (:func:`llmcore.zoo.cached`, entry
``respin-tiny-markov``; the key is every :class:`TinySpec` field plus a digest of this module's
source). Outliers are then injected exactly (function-preserving): fuse norms; rotate the
residual basis into the eigenbasis of the residual second moment (largest direction -> channel
0); scale 2 v_proj output channels and 2 up_proj rows per layer by S and divide the matching
o_proj / down_proj input columns by S.
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from respin_quant.arch import layers
from respin_quant.rotation import fuse_bases, fuse_norms

if TYPE_CHECKING:
    from llmcore.zoo import ZooEntry

log = logging.getLogger(__name__)

#: Zoo entry name of the tiny Markov Llama (``llmcore zoo list`` shows it).
ENTRY = "respin-tiny-markov"


@dataclass(frozen=True)
class TinySpec:
    """Recipe of the tiny Markov Llama (every field enters the cache key)."""

    vocab: int = 32
    hidden: int = 128
    layers: int = 4
    heads: int = 4
    intermediate: int = 256
    seqlen: int = 64
    candidates: int = 4
    dirichlet: float = 0.5
    source_seed: int = 0
    steps: int = 800
    batch: int = 32
    lr: float = 2e-3
    init_seed: int = 0
    data_seed: int = 1
    version: int = 1


#: The demo-size model of ``llmcore demo respin-quant``: the same source, architecture and
#: code path, far fewer pre-training steps (its own cache key), so the demo costs under a minute
#: cold on one thread. The claim tests run on the full :class:`TinySpec`.
DEMO_SPEC = TinySpec(steps=150, batch=16)


class MarkovSource:
    """Sparse order-2 Markov chain: each context (a, b) has k candidates, Dirichlet probabilities."""

    def __init__(self, spec: TinySpec):
        V, k = spec.vocab, spec.candidates
        g = torch.Generator().manual_seed(spec.source_seed)
        self.cand = torch.stack([torch.randperm(V, generator=g)[:k] for _ in range(V * V)])
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(spec.source_seed)
            probs = torch.distributions.Dirichlet(torch.full((k,), spec.dirichlet)).sample((V * V,))
        self.probs = probs
        self.V = V

    def sample(self, n: int, length: int, seed: int) -> Tensor:
        g = torch.Generator().manual_seed(seed)
        x = torch.empty(n, length, dtype=torch.long)
        x[:, :2] = torch.randint(0, self.V, (n, 2), generator=g)
        for t in range(2, length):
            ctx = x[:, t - 2] * self.V + x[:, t - 1]
            j = torch.multinomial(self.probs[ctx], 1, generator=g).squeeze(1)
            x[:, t] = self.cand[ctx, j]
        return x

    def entropy_ppl(self) -> float:
        """PPL of the true source (lower bound for a model, ignoring the first two tokens)."""
        p = self.probs.clamp_min(1e-30)
        h = (-(p * p.log()).sum(dim=1).mean()).item()
        return math.exp(h)


def eval_ids(spec: TinySpec = TinySpec(), n: int = 256) -> Tensor:
    return MarkovSource(spec).sample(n, spec.seqlen, seed=1000)


def calib_ids(spec: TinySpec = TinySpec(), n: int = 128) -> Tensor:
    return MarkovSource(spec).sample(n, spec.seqlen, seed=2000)


def _train(spec: TinySpec, progress: bool = True) -> nn.Module:
    from tqdm.auto import tqdm
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(spec.init_seed)
    cfg = LlamaConfig(
        vocab_size=spec.vocab,
        hidden_size=spec.hidden,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        intermediate_size=spec.intermediate,
        max_position_embeddings=spec.seqlen,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    model = LlamaForCausalLM(cfg)
    src = MarkovSource(spec)
    opt = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / spec.steps))
    )
    model.train()
    bar = tqdm(
        range(spec.steps),
        desc=f"{ENTRY} pre-training",
        disable=not progress,
        mininterval=1.0,
        leave=False,
    )
    for step in bar:
        ids = src.sample(spec.batch, spec.seqlen, seed=spec.data_seed * 1_000_003 + step)
        logits = model(ids).logits[:, :-1]
        loss = nn.functional.cross_entropy(logits.reshape(-1, spec.vocab), ids[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if step % 25 == 0 or step == spec.steps - 1:
            value = loss.detach().item()
            bar.set_postfix(loss=f"{value:.4f}", refresh=False)
            if step % 100 == 0:
                log.info("%s step %d loss %.4f", ENTRY, step, value)
    bar.close()
    return model.eval()


def tiny_material(spec: TinySpec = TinySpec()) -> dict[str, Any]:
    """The zoo key material of ``spec``: every recipe field and the digest of this module."""
    from llmcore import zoo

    return {"spec": asdict(spec), "code": zoo.code_digest(__name__)}


def build_tiny_entry(
    spec: TinySpec = TinySpec(),
    *,
    force: bool = False,
    threads: int | None = None,
    progress: bool = True,
) -> ZooEntry:
    """Train (once per machine) and cache the tiny Markov Llama; returns its zoo entry.

    The entry folder holds the saved model; its metrics record the FP perplexity on
    :func:`eval_ids`, the source's entropy perplexity, the training seconds and the thread
    count. ``threads``: torch threads while training; ``None`` means ``$LLMCORE_ZOO_THREADS``
    or 1, as for llmcore's zoo. Not part of the cache key, although another thread count
    changes the weights in the last bits (BLAS summation order). ``progress`` shows a
    progress bar while training (stderr)."""
    from llmcore import zoo

    if threads is None:
        threads = int(os.environ.get("LLMCORE_ZOO_THREADS", "1"))

    def make(tmp: Path) -> dict[str, Any]:
        from respin_quant.evaluate import perplexity

        prev = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            t0 = time.perf_counter()
            model = _train(spec, progress=progress)
            secs = time.perf_counter() - t0
            ppl = perplexity(model, eval_ids(spec), seqlen=spec.seqlen)
        finally:
            torch.set_num_threads(prev)
        model.save_pretrained(tmp)
        log.info("built %s in %.1f s (FP PPL %.3f)", ENTRY, secs, ppl)
        return {
            "train_seconds": secs,
            "threads": threads,
            "fp_ppl": ppl,
            "source_ppl": MarkovSource(spec).entropy_ppl(),
        }

    return zoo.cached(
        ENTRY,
        tiny_material(spec),
        make,
        force=force,
        progress=progress,
        description="tiny Llama pre-trained on a sparse order-2 Markov source (respin-quant)",
    )


def build_tiny(
    spec: TinySpec = TinySpec(),
    *,
    force: bool = False,
    threads: int | None = None,
    progress: bool = True,
) -> Path:
    """:func:`build_tiny_entry` and return the folder of the saved model."""
    return build_tiny_entry(spec, force=force, threads=threads, progress=progress).path


def tiny_meta(spec: TinySpec = TinySpec()) -> dict[str, Any]:
    """The recipe and build record of the cached model (builds it if missing)."""
    entry = build_tiny_entry(spec)
    return {
        "spec": asdict(spec),
        "key": entry.key,
        "build_seconds": entry.build_seconds,
        **entry.metrics,
    }


def load_tiny(spec: TinySpec = TinySpec(), dtype: torch.dtype = torch.float32) -> nn.Module:
    """The cached tiny model (built if missing), loaded on the CPU in eval mode."""
    from llmcore.models import load_causal_lm

    return load_causal_lm(build_tiny(spec), dtype=dtype, device="cpu")


@torch.no_grad()
def inject_outliers(
    model: nn.Module, calib: Tensor, scale: float = 50.0, seed: int = 0
) -> nn.Module:
    """Exactly function-preserving outlier injection, in place: fuse norms, rotate the residual
    basis to the eigenbasis of its second moment, scale 2 v_proj / up_proj channels per layer."""
    fuse_norms(model)
    D = model.config.hidden_size
    C = torch.zeros(D, D, dtype=torch.float64)
    handles = []

    def rec(_m: nn.Module, args: tuple[Any, ...]) -> None:
        h = args[0].double().reshape(-1, D)
        C.add_(h.T @ h)

    norms = [ly.input_layernorm for ly in layers(model)] + [
        ly.post_attention_layernorm for ly in layers(model)
    ]
    for nm in [*norms, model.model.norm]:
        handles.append(nm.register_forward_pre_hook(rec))
    try:
        for s in range(0, calib.shape[0], 32):
            model(calib[s : s + 32])
    finally:
        for h in handles:
            h.remove()
    evals, evecs = torch.linalg.eigh(C)
    V = evecs[:, torch.argsort(evals, descending=True)]
    L = len(layers(model))
    fuse_bases(model, [V] * (L + 1), [V] * L, None, None)
    g = torch.Generator().manual_seed(seed)
    for ly in layers(model):
        at, mlp = ly.self_attn, ly.mlp
        cv = torch.randperm(at.v_proj.out_features, generator=g)[:2]
        at.v_proj.weight[cv] *= scale
        if at.v_proj.bias is not None:
            at.v_proj.bias[cv] *= scale
        # v channel c feeds o_proj input column c for every query head sharing that kv head
        groups = model.config.num_attention_heads // model.config.num_key_value_heads
        dh = at.v_proj.out_features // model.config.num_key_value_heads
        for c in cv.tolist():
            kvh, j = divmod(c, dh)
            for r in range(groups):
                at.o_proj.weight[:, (kvh * groups + r) * dh + j] /= scale
        cu = torch.randperm(mlp.up_proj.out_features, generator=g)[:2]
        mlp.up_proj.weight[cu] *= scale
        mlp.down_proj.weight[:, cu] /= scale
    return model


def outlier_model(
    scale: float = 50.0, spec: TinySpec = TinySpec(), dtype: torch.dtype = torch.float32
) -> nn.Module:
    """The cached tiny model with outliers injected (fresh copy every call)."""
    m = load_tiny(spec, dtype=dtype)
    return inject_outliers(m, calib_ids(spec), scale=scale, seed=0)
