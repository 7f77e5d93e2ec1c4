"""Masked-diffusion fine-tuning loss and the LLaDA sampler with a per-step noise level.

``diffusion_sft_loss`` is LLaDA's SFT objective as in the reference trainer; ``generate`` is
llmcore's LLaDA sampler (:func:`llmcore.diffusion.llada_generate`) with NaRA's lambda passed at
every step, classifier-free guidance and EOS filling on top.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
import torch.nn.functional as F

from llmcore.diffusion import bidirectional_mask
from nara_peft.errors import NaraConfigError, NaraDataError
from nara_peft.noise import compute_noise_level

NATIVE_BIDIRECTIONAL = ("llada",)  # remote-code models that attend bidirectionally themselves


def _forward(model: Any, x: torch.Tensor, lam: torch.Tensor | None, **kw: Any) -> torch.Tensor:
    """Bidirectional logits: a 4-D all-zero additive mask for HF decoders (llmcore), plain
    ``input_ids`` for natively bidirectional models (LLaDA)."""
    if lam is not None:
        kw["noise_level"] = lam
    mtype = getattr(getattr(model, "config", None), "model_type", "")
    if mtype in NATIVE_BIDIRECTIONAL:
        return model(input_ids=x, **kw).logits
    attn = bidirectional_mask(torch.ones_like(x), torch.float32)
    return model(input_ids=x, attention_mask=attn, use_cache=False, **kw).logits


def mask_answers(
    input_ids: torch.Tensor,
    prompt_lengths: torch.Tensor,
    mask_token_id: int,
    generator: torch.Generator | None = None,
    t: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mask exactly k = ceil(t * L_ans) answer positions per row, t ~ U(0, 1).

    Returns ``(noisy, masked [B,T] bool, t [B])``."""
    B, T = input_ids.shape
    pl = torch.as_tensor(prompt_lengths).reshape(-1).to(torch.long)
    if pl.numel() != B:
        raise NaraDataError(f"prompt_lengths has {pl.numel()} entries for a batch of {B}")
    if bool((pl >= T).any()):
        raise NaraDataError(
            f"prompt length {int(pl.max())} >= sequence length {T}: the answer region is empty"
        )
    if t is None:
        t = torch.rand(B, generator=generator)
    l_ans = (T - pl).float()
    k = torch.clamp(torch.ceil(t * l_ans), min=1).to(torch.long)
    pos = torch.arange(T)[None, :]
    answer = pos >= pl[:, None]
    scores = torch.rand(B, T, generator=generator).masked_fill(~answer, 2.0)
    ranks = scores.argsort(dim=1).argsort(dim=1)
    masked = ranks < k[:, None]
    noisy = torch.where(masked, torch.full_like(input_ids, mask_token_id), input_ids)
    return noisy, masked, t


def diffusion_sft_loss(
    model: Any,
    input_ids: torch.Tensor,
    prompt_lengths: torch.Tensor,
    mask_token_id: int,
    generator: torch.Generator | None = None,
    *,
    direct_noise_level: bool = True,
    pass_noise: bool = True,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """LLaDA SFT loss: sum of masked CE / (L_ans * t), batch mean, lambda = t.

    ``pass_noise=False`` for plain LoRA/base models (no ``noise_level`` kwarg)."""
    dev = input_ids.device
    noisy, masked, t = mask_answers(input_ids.cpu(), prompt_lengths, mask_token_id, generator)
    noisy, masked, t = noisy.to(dev), masked.to(dev), t.to(dev)
    pl = torch.as_tensor(prompt_lengths).reshape(-1).to(dev)
    l_ans = (input_ids.shape[1] - pl).float()
    lam = t if direct_noise_level else compute_noise_level(noisy, mask_token_id)
    logits = _forward(model, noisy, lam if pass_noise else None)
    ce = F.cross_entropy(logits.float().transpose(1, 2), input_ids, reduction="none")
    per_row = (ce * masked).sum(1) / (l_ans * t.clamp_min(1e-6))
    return per_row.mean(), {"t": t.detach(), "per_row": per_row.detach()}


class _DenoiserView(torch.nn.Module):
    """What llmcore's sampler sees: a bidirectional denoiser whose forward adds what NaRA's
    evaluation needs on top of a plain forward. It recomputes lambda from the canvas at every
    step and passes it to the adapters, applies classifier-free guidance (prompt masked out for
    the unconditional pass), and calls natively bidirectional models without the 4-D mask."""

    def __init__(
        self,
        model: Any,
        prompt_length: int,
        mask_token_id: int,
        *,
        cfg_scale: float,
        inference_noise: str,
        pass_noise: bool,
    ) -> None:
        super().__init__()
        self.model = model
        self.prompt_length = prompt_length
        self.mask_token_id = mask_token_id
        self.cfg_scale = cfg_scale
        self.inference_noise = inference_noise
        self.pass_noise = pass_noise

    def _noise(self, canvas: torch.Tensor) -> torch.Tensor | None:
        if not self.pass_noise:
            return None
        if self.inference_noise == "answer":
            pl = torch.full((canvas.shape[0],), self.prompt_length)
            return compute_noise_level(canvas, self.mask_token_id, prompt_lengths=pl)
        return compute_noise_level(canvas, self.mask_token_id)

    def forward(self, input_ids: torch.Tensor, **_: Any) -> Any:
        from types import SimpleNamespace

        x = input_ids
        lam = self._noise(x)
        logits = _forward(self.model, x, lam)
        if self.cfg_scale > 0:
            un = x.clone()
            un[:, : self.prompt_length] = self.mask_token_id
            lam_u = self._noise(un) if self.inference_noise == "full_sequence" else lam
            unc = _forward(self.model, un, lam_u)
            logits = unc + (self.cfg_scale + 1) * (logits - unc)
        return SimpleNamespace(logits=logits)


def _eos_fill(x: torch.Tensor, prompt_length: int, block_length: int, eos: int) -> torch.Tensor:
    """After the first block by which every row has produced ``eos``, fill the rest with
    ``eos`` (later blocks never change earlier ones, so the kept text is unaffected)."""
    done = torch.zeros(x.shape[0], dtype=torch.bool, device=x.device)
    for lo in range(prompt_length, x.shape[1], block_length):
        hi = lo + block_length
        done |= (x[:, lo:hi] == eos).any(1)
        if bool(done.all()) and hi < x.shape[1]:
            x[:, hi:] = eos
            break
    return x


@torch.no_grad()
def generate(
    model: Any,
    prompt_ids: torch.Tensor,
    *,
    mask_token_id: int,
    steps: int = 128,
    gen_length: int = 128,
    block_length: int = 128,
    temperature: float = 0.0,
    cfg_scale: float = 0.0,
    remasking: Literal["low_confidence", "random"] = "low_confidence",
    eos_token_id: int | None = None,
    inference_noise: Literal["answer", "full_sequence"] = "answer",
    pass_noise: bool = True,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """LLaDA's semi-autoregressive low-confidence remasking with lambda passed at every step.

    Sampling is :func:`llmcore.diffusion.llada_generate`; this adds NaRA's per-step lambda
    (the masked fraction of the answer canvas, or of the whole canvas with
    ``inference_noise="full_sequence"``), classifier-free guidance (``cfg_scale``) and, with
    ``eos_token_id``, EOS after the first block by which every row has emitted it.
    ``pass_noise=False`` for models without NaRA adapters. ``generator`` seeds Gumbel noise
    (``temperature > 0``) and random remasking; a CPU generator for a model on another device
    is replaced by one on that device seeded with its initial seed. Returns
    ``[B, P + gen_length]``."""
    from llmcore.diffusion import llada_generate
    from llmcore.errors import ConfigError

    if inference_noise not in ("answer", "full_sequence"):
        raise NaraConfigError(
            f"inference_noise={inference_noise!r}; use 'answer' or 'full_sequence'"
        )
    if cfg_scale < 0:
        raise NaraConfigError(f"cfg_scale must be >= 0, got {cfg_scale}")
    P = prompt_ids.shape[1]
    view = _DenoiserView(
        model,
        P,
        mask_token_id,
        cfg_scale=cfg_scale,
        inference_noise=inference_noise,
        pass_noise=pass_noise,
    )
    if generator is not None and generator.device != prompt_ids.device:
        generator = torch.Generator(prompt_ids.device).manual_seed(generator.initial_seed())
    try:
        x = llada_generate(
            view,
            prompt_ids,
            mask_token_id,
            gen_length=gen_length,
            steps=steps,
            block_length=block_length,
            temperature=temperature,
            remasking=remasking,
            generator=generator,
        )
    except ConfigError as e:
        raise NaraConfigError(str(e)) from None
    if eos_token_id is not None:
        x = _eos_fill(x, P, block_length, eos_token_id)
    return x
