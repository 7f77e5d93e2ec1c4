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

    from llmcore.errors import ConfigError

    extra_special_tokens = tuple(extra_special_tokens)
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
    return _wrap(tok, extra_special_tokens)


def word_tokenizer(
    symbols: Iterable[str],
    *,
    extra_special_tokens: Iterable[str] = (),
) -> PreTrainedTokenizerFast:
    """A tokenizer with exactly one token per symbol (whitespace-separated words), for synthetic
    tasks where a BPE merge would blur the unit the method reasons about (digits, states, graph
    nodes). Same special tokens (pad id 0), chat tokens and chat template as
    :func:`train_bpe_tokenizer`; unknown words map to ``<unk>``; decoding joins with spaces."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    from llmcore.errors import ConfigError

    extra_special_tokens = tuple(extra_special_tokens)
    specials = [*SPECIAL_TOKENS.values(), *CHAT_TOKENS, *extra_special_tokens]
    words: list[str] = []
    for s in symbols:
        if not s or any(c.isspace() for c in s):
            raise ConfigError(f"word-tokenizer symbols must be non-empty and space-free, got {s!r}")
        if s not in words and s not in specials:
            words.append(s)
    if not words:
        raise ConfigError("word_tokenizer() needs at least one symbol")
    vocab = {t: i for i, t in enumerate([*specials, *words])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=SPECIAL_TOKENS["unk_token"]))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return _wrap(tok, extra_special_tokens)


def corpus_symbols(texts: Iterable[str]) -> list[str]:
    """Every whitespace-separated word of ``texts``, sorted (the default word vocabulary)."""
    return sorted({w for t in texts for w in t.split()})


def _wrap(tok, extra_special_tokens: Iterable[str]) -> PreTrainedTokenizerFast:
    """A ``tokenizers.Tokenizer`` as ``PreTrainedTokenizerFast`` with the zoo's special tokens,
    chat role tokens, left padding and chat template."""
    from transformers import PreTrainedTokenizerFast

    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        additional_special_tokens=[*CHAT_TOKENS, *extra_special_tokens],
        padding_side="left",
        **SPECIAL_TOKENS,
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped
