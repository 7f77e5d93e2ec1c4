"""Recipe dataclasses: everything that determines a zoo model (and so its cache key)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from llmcore.errors import ConfigError
from llmcore.zoo.corpus import Corpus


@dataclass(frozen=True)
class TokenizerSpec:
    """The recipe's tokenizer: byte-level BPE trained on its corpus, or one token per word.

    With ``kind="bpe"``, ``vocab_size=264`` (256 bytes + the 8 special and chat tokens) leaves
    no room for a merge, so every character is one token (useful for character-level tasks)."""

    vocab_size: int = 512
    """Total vocabulary including the special tokens (BPE only)."""
    min_frequency: int = 2
    """Minimum pair frequency for a BPE merge."""
    extra_special_tokens: tuple[str, ...] = ()
    """Additional special tokens a method needs (e.g. separators)."""
    kind: Literal["bpe", "word"] = "bpe"
    """``"bpe"``: byte-level BPE; ``"word"``: one token per whitespace-separated symbol
    (:func:`llmcore.zoo.word_tokenizer`), with the same special tokens and chat template."""
    symbols: tuple[str, ...] = ()
    """The word tokenizer's symbols; empty means every whitespace-separated word of the
    training corpus, sorted."""

    def __post_init__(self) -> None:
        if self.kind not in ("bpe", "word"):
            raise ConfigError(f"tokenizer kind must be 'bpe' or 'word', got {self.kind!r}")
        if self.symbols and self.kind != "word":
            raise ConfigError("TokenizerSpec.symbols is only used with kind='word'")

    def key_material(self) -> dict[str, Any]:
        d = asdict(self)
        if self.kind == "bpe":  # keeps the keys of recipes made before word tokenizers existed
            d.pop("kind")
            d.pop("symbols")
        else:
            d.pop("vocab_size")
            d.pop("min_frequency")
            d["symbols"] = list(self.symbols)
        return d


@dataclass(frozen=True)
class ModelSpec:
    """Architecture of a tiny decoder built from a transformers config."""

    arch: Literal["llama", "qwen2"] = "llama"
    """transformers architecture family."""
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int | None = None
    """Key/value heads (GQA); ``None`` means ``num_heads``."""
    intermediate_size: int = 384
    max_position_embeddings: int = 128
    tie_word_embeddings: bool = False
    rope_theta: float = 10000.0
    attn_implementation: str | None = None
    """transformers attention backend (``"eager"``, ``"sdpa"``...); ``None`` means the library
    default. Recorded in the cache entry and applied by ``ZooEntry.load`` (methods that read
    attention weights need ``"eager"``)."""

    def key_material(self) -> dict[str, Any]:
        d = asdict(self)
        if d["attn_implementation"] is None:  # keeps the keys of earlier recipes
            d.pop("attn_implementation")
        return d

    def __post_init__(self) -> None:
        if self.arch not in ("llama", "qwen2"):
            raise ConfigError(f"arch must be 'llama' or 'qwen2', got {self.arch!r}")
        for name in ("hidden_size", "num_layers", "num_heads", "intermediate_size"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.hidden_size % self.num_heads:
            raise ConfigError(
                f"hidden_size={self.hidden_size} must be divisible by num_heads={self.num_heads}"
            )
        kv = self.num_kv_heads or self.num_heads
        if self.num_heads % kv:
            raise ConfigError(f"num_heads={self.num_heads} must be divisible by num_kv_heads={kv}")


@dataclass(frozen=True)
class TrainSpec:
    """Optimisation of a zoo recipe (AdamW, linear warm-up then cosine decay)."""

    objective: Literal["causal", "masked_diffusion"] = "causal"
    """Next-token prediction, or the LLaDA masked-diffusion loss (bidirectional)."""
    steps: int = 1500
    batch_size: int = 32
    lr: float = 3e-3
    warmup_steps: int = 100
    weight_decay: float = 0.01
    max_length: int = 96
    """Documents are truncated to this many tokens (bos/eos included); with ``packing``, the
    length of every training window."""
    packing: bool = False
    """Concatenate all documents into one token stream and train on random windows of
    ``max_length`` tokens (what stream perplexity measures), instead of one padded row per
    document."""
    seed: int = 0
    threads: int | None = None
    """torch threads while training; ``None`` means ``$LLMCORE_ZOO_THREADS`` or 1 (see the
    llmcore README for the measurements behind that default). Not part of the cache key, although
    another thread count changes the weights in the last bits (BLAS summation order)."""

    def __post_init__(self) -> None:
        if self.objective not in ("causal", "masked_diffusion"):
            raise ConfigError(
                f"objective must be 'causal' or 'masked_diffusion', got {self.objective!r}"
            )
        if self.steps <= 0 or self.batch_size <= 0 or self.lr <= 0:
            raise ConfigError("steps, batch_size and lr must be positive")


@dataclass(frozen=True)
class Recipe:
    """A reproducible tiny model: corpus + tokenizer + architecture + training + quality gate."""

    name: str
    corpus: Corpus
    tokenizer: TokenizerSpec = field(default_factory=TokenizerSpec)
    model: ModelSpec = field(default_factory=ModelSpec)
    train: TrainSpec = field(default_factory=TrainSpec)
    max_eval_loss: float = 1.5
    """Quality gate: mean per-token loss on the held-out split (nats) must not exceed this."""
    description: str = ""

    def key_material(self) -> dict[str, Any]:
        """What determines the trained weights (the cache key hashes this plus library versions)."""
        train = asdict(self.train)
        train.pop("threads")
        if not train["packing"]:
            train.pop("packing")  # keeps the keys of recipes made before the option existed
        return {
            "name": self.name,
            "corpus": {"name": self.corpus.name, "fingerprint": self.corpus.fingerprint},
            "tokenizer": self.tokenizer.key_material(),
            "model": self.model.key_material(),
            "train": train,
            "max_eval_loss": self.max_eval_loss,
        }
