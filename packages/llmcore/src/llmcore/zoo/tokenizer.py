"""Byte-level BPE tokenizer trained locally with `tokenizers`, wrapped for transformers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

#: Special tokens every zoo tokenizer carries, in id order (pad is id 0).
SPECIAL_TOKENS: dict[str, str] = {
    "pad_token": "<pad>",
    "bos_token": "<s>",
    "eos_token": "</s>",
    "unk_token": "<unk>",
    "mask_token": "<mask>",
}
CHAT_TOKENS = ("<|user|>", "<|assistant|>", "<|system|>")

#: A minimal chat template: role tags, each turn ended by eos; generation prompt opens the
#: assistant turn.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>' + message['content'] + eos_token }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)


def train_bpe_tokenizer(
    texts: Iterable[str],
    vocab_size: int = 512,
    *,
    min_frequency: int = 2,
    extra_special_tokens: Iterable[str] = (),
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer on ``texts`` and wrap it as ``PreTrainedTokenizerFast``.

    The tokenizer has pad/bos/eos/unk/mask tokens, chat role tokens and a chat template; it adds
    no special tokens on encode (callers add bos/eos where their recipe wants them). Training is
    deterministic for a given ``texts`` order.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from llmcore.errors import ConfigError

    specials = [*SPECIAL_TOKENS.values(), *CHAT_TOKENS, *extra_special_tokens]
    if vocab_size < 256 + len(specials):
        raise ConfigError(
            f"vocab_size={vocab_size} is too small for a byte-level BPE: it needs at least "
            f"{256 + len(specials)} (256 bytes + {len(specials)} special tokens)"
        )
    tok = Tokenizer(models.BPE(unk_token=SPECIAL_TOKENS["unk_token"]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer=trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        additional_special_tokens=[*CHAT_TOKENS, *extra_special_tokens],
        padding_side="left",
        **SPECIAL_TOKENS,
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped
