"""The tiny masked-diffusion LM of the CPU experiment and its cached pre-training.

This module holds everything that determines the pre-trained weights (the chain data, the
model, the bidirectional forward, the training loop): its source digest is part of the zoo key,
so editing it rebuilds the cached model, while edits to the fine-tuning experiment
(:mod:`nara_peft.synth`) do not.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from llmcore.diffusion import bidirectional_mask

if TYPE_CHECKING:
    from llmcore.zoo import ZooEntry
    from nara_peft.synth import SynthSpec

VOCAB = 16
MASK_ID = 16
ENTRY_NAME = "nara-peft-tiny-mdlm"
WEIGHTS = "model.safetensors"
PRETRAIN_FIELDS = (
    "seq_len",
    "p_chain",
    "perm_seed",
    "pretrain_steps",
    "pretrain_batch",
    "pretrain_lr",
)
"""The :class:`~nara_peft.synth.SynthSpec` fields that determine the pre-trained weights."""


def permutations(spec: SynthSpec) -> tuple[torch.Tensor, torch.Tensor]:
    """The fixed random permutations f0 (chain rule) and g (scrambling)."""
    g = torch.Generator().manual_seed(spec.perm_seed)
    return torch.randperm(VOCAB, generator=g), torch.randperm(VOCAB, generator=g)


def make_chains(n: int, spec: SynthSpec, gen: torch.Generator) -> torch.Tensor:
    """``[n, seq_len]`` chains of the f0 Markov process."""
    f0, _ = permutations(spec)
    x = torch.empty(n, spec.seq_len, dtype=torch.long)
    x[:, 0] = torch.randint(0, VOCAB, (n,), generator=gen)
    for i in range(1, spec.seq_len):
        keep = torch.rand(n, generator=gen) < spec.p_chain
        rand = torch.randint(0, VOCAB, (n,), generator=gen)
        x[:, i] = torch.where(keep, f0[x[:, i - 1]], rand)
    return x


def tiny_model(seed: int = 0) -> torch.nn.Module:
    """The tiny Llama of the experiment (vocab 17, hidden 64, 2 layers, 4 heads), random init."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=VOCAB + 1,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        intermediate_size=128,
        max_position_embeddings=16,
        pad_token_id=None,
        bos_token_id=None,
        eos_token_id=None,
        tie_word_embeddings=False,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(cfg)
    model.config.model_type = "llama"
    return model.float()


def logits_of(model: Any, x: torch.Tensor, lam: torch.Tensor | None = None) -> torch.Tensor:
    """Bidirectional forward (4-D all-zero additive mask); lambda only for NaRA models."""
    kw: dict[str, Any] = {}
    if lam is not None:
        kw["noise_level"] = lam
    attn = bidirectional_mask(torch.ones_like(x), torch.float32)
    return model(input_ids=x, attention_mask=attn, use_cache=False, **kw).logits


def pretrain_material(spec: SynthSpec) -> dict[str, Any]:
    """Zoo key material of the pre-trained model: the pre-training fields of ``spec`` and the
    digest of this module's source."""
    from llmcore.zoo import code_digest

    return {
        "spec": {f: getattr(spec, f) for f in PRETRAIN_FIELDS},
        "code": code_digest(__name__),
    }


def _pretrain(spec: SynthSpec, out_dir: Path, progress: bool) -> dict[str, Any]:
    """1,000 AdamW steps of the masked-diffusion loss on fresh chains; writes ``model.safetensors``."""
    from safetensors.torch import save_file
    from tqdm.auto import tqdm

    from llmcore.runtime import num_threads

    model = tiny_model(0)
    gen = torch.Generator().manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=spec.pretrain_lr, weight_decay=0.0)
    model.train()
    loss = torch.zeros(())
    # Like llmcore's zoo: one thread unless $LLMCORE_ZOO_THREADS says otherwise (the count
    # may change the weights in their last bits, so it is not part of the key).
    with num_threads(int(os.environ.get("LLMCORE_ZOO_THREADS", "1"))):
        for _ in tqdm(range(spec.pretrain_steps), disable=not progress, desc="pretrain tiny MDLM"):
            x = make_chains(spec.pretrain_batch, spec, gen)
            t = 0.01 + 0.98 * torch.rand(x.shape[0], 1, generator=gen)
            masked = torch.rand(x.shape, generator=gen) < t
            masked[:, 0] |= ~masked.any(1)
            noisy = x.masked_fill(masked, MASK_ID)
            logits = logits_of(model, noisy)
            ce = F.cross_entropy(logits.transpose(1, 2), x, reduction="none")
            loss = ((ce * masked) / t).sum() / x.numel()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(out_dir / WEIGHTS))
    return {"final_loss": float(loss.detach())}


def pretrained_entry(
    spec: SynthSpec | None = None, *, progress: bool = False, force: bool = False
) -> ZooEntry:
    """The zoo entry (``nara-peft-tiny-mdlm``) holding the pre-trained weights for ``spec``:
    built once per machine under the llmcore cache (locked, atomic), then reused. Its folder
    holds ``model.safetensors``; ``llmcore zoo list`` shows it and ``llmcore zoo clear``
    removes it."""
    from llmcore import zoo
    from nara_peft.synth import SynthSpec

    spec = spec or SynthSpec()
    return zoo.cached(
        ENTRY_NAME,
        pretrain_material(spec),
        lambda tmp: _pretrain(spec, tmp, progress),
        force=force,
        progress=progress,
        description="tiny bidirectional Llama pre-trained as a masked diffusion LM on the chains",
    )


def pretrained_tiny(spec: SynthSpec | None = None, *, progress: bool = False) -> torch.nn.Module:
    """The tiny masked-diffusion LM pre-trained on the chains (eval mode), from the zoo cache
    (built on first use, about 30 s of one core)."""
    from safetensors.torch import load_file

    entry = pretrained_entry(spec, progress=progress)
    model = tiny_model(0)
    model.load_state_dict(load_file(str(entry.path / WEIGHTS)))
    return model.eval()
