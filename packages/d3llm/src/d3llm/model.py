"""A masked diffusion LM over any Hugging Face Llama/Qwen2-style decoder (LLaDA / Dream style).

The wrapped ``*ForCausalLM`` is made bidirectional by passing an explicit 4-D attention mask
that allows every query/key pair (:func:`llmcore.diffusion.bidirectional_mask`); with a KV cache
of ``C`` positions the mask is ``[B, 1, Q, C + Q]`` of zeros. Dream-style models are
autoregressively initialised, so their logit at position ``i - 1`` predicts token ``i``:
``logits_shift="right"`` shifts the logits right by one before use (paper's Sec. 2, Dream).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from d3llm.errors import D3LLMConfigError, NotBidirectionalError

if TYPE_CHECKING:
    import torch

LogitsShift = Literal["none", "right"]

PRESETS: dict[str, dict[str, Any]] = {
    "llada": {"mask_token_id": 126336, "logits_shift": "none"},
    "dream": {"mask_token_id": 151666, "logits_shift": "right"},
}
"""Mask id and logit shift of the two model families (LLaDA-8B, Dream-7B)."""


def preset_for(name_or_path: str, model_type: str | None = None) -> str | None:
    """The preset (``"llada"``/``"dream"``) a checkpoint name or config ``model_type`` implies."""
    text = f"{name_or_path} {model_type or ''}".lower()
    for key in PRESETS:
        if key in text:
            return key
    return None


class MaskedDiffusionLM:
    """A bidirectional masked-diffusion view of a causal-LM checkpoint.

    ``forward(x)`` returns logits for every position of ``x`` (shifted right by one for
    ``logits_shift="right"``) and, with ``use_cache=True``, the KV cache of that forward.
    With ``past_key_values`` holding the first ``C`` positions, ``x`` is the suffix from ``C``
    on and the returned logits cover only the suffix."""

    def __init__(
        self,
        model: Any,
        mask_token_id: int,
        logits_shift: LogitsShift = "none",
        eos_token_id: int | None = None,
    ) -> None:
        if mask_token_id is None or int(mask_token_id) < 0:
            raise D3LLMConfigError(
                f"mask_token_id must be a non-negative token id, got {mask_token_id!r}; pass the "
                "tokenizer's mask id or use a preset (llada: 126336, dream: 151666)"
            )
        if logits_shift not in ("none", "right"):
            raise D3LLMConfigError(
                f"logits_shift must be 'none' (LLaDA) or 'right' (Dream), got {logits_shift!r}"
            )
        self.model = model
        self.mask_token_id = int(mask_token_id)
        self.logits_shift: LogitsShift = logits_shift
        if eos_token_id is None:
            eos_token_id = getattr(getattr(model, "config", None), "eos_token_id", None)
            if isinstance(eos_token_id, list):
                eos_token_id = eos_token_id[0] if eos_token_id else None
        self.eos_token_id = eos_token_id

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    def forward(
        self, x: torch.Tensor, past_key_values: Any = None, use_cache: bool = False
    ) -> tuple[torch.Tensor, Any]:
        """Bidirectional forward: ``(logits [B, T, V] float32, cache or None)``."""
        import torch

        B, Q = x.shape
        C = 0 if past_key_values is None else int(past_key_values.get_seq_length())
        mask = torch.zeros(B, 1, Q, C + Q, dtype=self.dtype, device=x.device)
        kwargs: dict[str, Any] = {"input_ids": x, "attention_mask": mask, "use_cache": use_cache}
        if past_key_values is not None:
            kwargs["past_key_values"] = past_key_values
            kwargs["position_ids"] = torch.arange(C, C + Q, device=x.device)[None].expand(B, -1)
        out = self.model(**kwargs)
        logits = out.logits.float()
        if self.logits_shift == "right":
            logits = torch.cat([logits[:, :1], logits[:, :-1]], dim=1)
        return logits, (getattr(out, "past_key_values", None) if use_cache else None)

    __call__ = forward

    def check_bidirectional(self, length: int = 8, seed: int = 0) -> None:
        """Raise :class:`NotBidirectionalError` unless changing the last token of a random input
        changes the first position's logits (a causal model cannot)."""
        import torch

        vocab = int(self.model.get_input_embeddings().weight.shape[0])
        g = torch.Generator().manual_seed(seed)
        x = torch.randint(0, vocab, (1, length), generator=g).to(self.device)
        y = x.clone()
        y[0, -1] = (y[0, -1] + 1) % vocab
        with torch.no_grad():
            a = self.forward(x)[0][0, 0]
            b = self.forward(y)[0][0, 0]
        if torch.allclose(a, b, atol=0.0, rtol=0.0):
            raise NotBidirectionalError(
                f"{type(self.model).__name__} is not bidirectional: changing the last token left "
                "the first position's logits unchanged. The model must accept an explicit 4-D "
                "attention mask [B, 1, Q, K] of zeros (or all-True booleans) and pass it to its "
                "attention layers; Llama/Qwen2 in transformers do, a model that rebuilds a causal "
                "mask internally does not (load LLaDA/Dream with their own code instead)"
            )


def build_tiny_mdlm(
    tokenizer: Any,
    hidden: int = 128,
    layers: int = 4,
    heads: int = 4,
    intermediate: int = 512,
    arch: Literal["llama", "qwen2"] = "llama",
    seed: int = 0,
) -> MaskedDiffusionLM:
    """A randomly initialised tiny masked-diffusion LM (``llmcore.zoo.train.build_model``)."""
    from llmcore.zoo import ModelSpec
    from llmcore.zoo.train import build_model

    if getattr(tokenizer, "mask_token_id", None) is None:
        raise D3LLMConfigError("the tokenizer has no mask token; add one (e.g. '<mask>')")
    spec = ModelSpec(
        arch=arch,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        intermediate_size=intermediate,
    )
    model = build_model(spec, tokenizer, seed=seed).eval()
    return MaskedDiffusionLM(model, tokenizer.mask_token_id, "none", tokenizer.eos_token_id)


def load_mdlm(
    name_or_path: str,
    mask_token_id: int | None = None,
    logits_shift: LogitsShift | None = None,
    trust_remote_code: bool = False,
    *,
    device: str | None = None,
    dtype: str | None = None,
) -> tuple[MaskedDiffusionLM, Any]:
    """Load a checkpoint as a :class:`MaskedDiffusionLM` plus its tokenizer.

    The mask id comes from the argument, the tokenizer's mask token, or the LLaDA/Dream preset
    the name implies; ``logits_shift`` from the argument or the preset (an unknown architecture
    without it is an error). Remote code runs only with ``trust_remote_code=True``."""
    from llmcore.models import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(
        name_or_path, device=device, dtype=dtype, trust_remote_code=trust_remote_code
    )
    mtype = getattr(model.config, "model_type", None)
    preset = preset_for(name_or_path, mtype)
    if getattr(model.config, "llmcore_objective", None) == "masked_diffusion":
        preset = preset or "zoo"
    if mask_token_id is None:
        mask_token_id = getattr(tok, "mask_token_id", None)
        if mask_token_id is None and preset in PRESETS:
            mask_token_id = PRESETS[preset]["mask_token_id"]
    if mask_token_id is None:
        raise D3LLMConfigError(
            f"{name_or_path!r}: the tokenizer has no mask token and none was given; pass "
            "mask_token_id (LLaDA 126336, Dream 151666)"
        )
    if logits_shift is None:
        if preset in PRESETS:
            logits_shift = PRESETS[preset]["logits_shift"]
        elif preset == "zoo":
            logits_shift = "none"
        else:
            raise D3LLMConfigError(
                f"logits_shift is needed for the unknown architecture {mtype!r} of "
                f"{name_or_path!r}; presets: llada -> 'none', dream -> 'right'"
            )
    return MaskedDiffusionLM(model, mask_token_id, logits_shift, tok.eos_token_id), tok
