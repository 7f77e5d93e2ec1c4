"""Backend-independent generation types: sampling parameters, completions, the backend protocol.

Every backend maps :class:`SamplingParams` onto its engine and returns the same nested result
shape: ``result[i][j]`` is the ``j``-th of ``params.n`` samples for ``prompts[i]``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from llmcore.errors import ConfigError

if TYPE_CHECKING:
    from transformers import PreTrainedModel

FinishReason = Literal["stop", "length"]

#: Backend names accepted by :func:`get_backend`.
BACKEND_NAMES: tuple[str, ...] = ("hf", "vllm", "openai")


@dataclass(frozen=True)
class SamplingParams:
    """How to sample; identical meaning on every backend.

    Attributes:
        n: samples per prompt (>= 1).
        temperature: 0.0 means greedy decoding; otherwise softmax temperature (> 0).
        top_p: nucleus mass in (0, 1]; 1.0 disables it.
        top_k: keep the k most likely tokens; 0 disables it.
        max_new_tokens: upper bound on generated tokens per sample (>= 1).
        seed: makes sampling reproducible when set (non-negative int).
        stop: strings that end a sample; the text is cut before the first one (stop string
            excluded) and the finish reason becomes ``"stop"``.
        logprobs: also return the log-probability of every generated token.
        repetition_penalty: CTRL-style penalty (Keskar et al. 2019) on every token already in
            the prompt or the generation: its logit is divided by the penalty when positive and
            multiplied by it when negative; 1.0 disables it, > 1 discourages repeats (> 0).
            Honoured by the HF and vLLM backends; the HTTP backend sends it as the non-OpenAI
            ``repetition_penalty`` field that vLLM and TGI servers accept.
    """

    n: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 64
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    logprobs: bool = False
    repetition_penalty: float = 1.0

    def __post_init__(self) -> None:
        def bad(name: str, value: object, allowed: str) -> ConfigError:
            return ConfigError(f"SamplingParams.{name}={value!r} is invalid: {allowed}")

        def is_int(value: object) -> bool:
            return isinstance(value, int) and not isinstance(value, bool)

        def is_real(value: object) -> bool:
            return isinstance(value, int | float) and not isinstance(value, bool)

        if not is_int(self.n) or self.n < 1:
            raise bad("n", self.n, "expected an int >= 1")
        if not is_real(self.temperature) or not math.isfinite(self.temperature):
            raise bad("temperature", self.temperature, "expected a finite float >= 0")
        if self.temperature < 0:
            raise bad("temperature", self.temperature, "expected a finite float >= 0")
        if not is_real(self.top_p) or not 0.0 < self.top_p <= 1.0:
            raise bad("top_p", self.top_p, "expected a float in (0, 1]")
        if not is_int(self.top_k) or self.top_k < 0:
            raise bad("top_k", self.top_k, "expected an int >= 0 (0 disables top-k)")
        if not is_int(self.max_new_tokens) or self.max_new_tokens < 1:
            raise bad("max_new_tokens", self.max_new_tokens, "expected an int >= 1")
        if self.seed is not None and (not is_int(self.seed) or not 0 <= self.seed < 2**63):
            raise bad("seed", self.seed, "expected None or an int in [0, 2**63)")
        if isinstance(self.stop, str) or not isinstance(self.stop, Sequence):
            raise bad("stop", self.stop, "expected a list of non-empty strings")
        if not all(isinstance(s, str) and s for s in self.stop):
            raise bad("stop", self.stop, "expected a list of non-empty strings")
        if (
            not is_real(self.repetition_penalty)
            or not math.isfinite(self.repetition_penalty)
            or self.repetition_penalty <= 0
        ):
            raise bad("repetition_penalty", self.repetition_penalty, "expected a finite float > 0")
        if not isinstance(self.logprobs, bool):
            raise bad("logprobs", self.logprobs, "expected a bool")
        # Normalise tuples etc. to a fresh list so callers cannot mutate it under us.
        object.__setattr__(self, "stop", list(self.stop))

    @property
    def greedy(self) -> bool:
        """True when decoding is greedy (temperature 0)."""
        return self.temperature == 0.0


@dataclass
class Completion:
    """One generated sample.

    Attributes:
        prompt_index: index of the prompt in the ``prompts`` list passed to ``generate``.
        sample_index: index of this sample among the ``n`` samples of its prompt.
        text: generated text (prompt excluded, special tokens skipped, cut before a stop string).
        token_ids: generated token ids, up to and including the eos token or the token that
            completed a stop string. Empty for the HTTP backend (the OpenAI API returns text).
        logprobs: when requested, the log-probability of each entry of ``token_ids`` under the
            model's *raw* next-token distribution (log-softmax of the logits, before temperature,
            top-k and top-p), matching vLLM's default; ``None`` when not requested.
        finish_reason: ``"stop"`` (eos or stop string) or ``"length"`` (hit ``max_new_tokens``).
    """

    prompt_index: int
    sample_index: int
    text: str
    token_ids: list[int]
    logprobs: list[float] | None
    finish_reason: FinishReason


@runtime_checkable
class GenerationBackend(Protocol):
    """Anything that turns prompts into completions.

    Backends that can also score text provide
    ``score(pairs, *, add_bos=None) -> list[list[float]]``: for every ``(prompt, completion)``
    pair, the natural-log probability of each completion token given the prompt and the
    completion tokens before it, with the tokenisation and BOS rule of
    :func:`llmcore.metrics.completion_token_ids` (``sum`` of a row is the completion's
    log-likelihood). :class:`~llmcore.generation.hf.HFBackend` and
    :class:`~llmcore.generation.vllm_backend.VLLMBackend` implement it;
    :class:`~llmcore.generation.openai_http.OpenAIBackend` raises ``BackendError``. It is not
    part of the structural check, so generation-only backends still satisfy this protocol.
    """

    def generate(self, prompts: list[str], params: SamplingParams) -> list[list[Completion]]:
        """Generate ``params.n`` samples for every prompt.

        Returns a list with one entry per prompt, in prompt order; entry ``i`` holds ``params.n``
        completions ordered by ``sample_index``.
        """
        ...


def truncate_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """Cut ``text`` before the earliest occurrence of any stop string.

    Returns ``(text, found)``.
    """
    cut = min((i for i in (text.find(s) for s in stop) if i >= 0), default=-1)
    if cut < 0:
        return text, False
    return text[:cut], True


def get_backend(name: str, model: str | PreTrainedModel, **kwargs: Any) -> GenerationBackend:
    """Build a backend by name.

    Args:
        name: ``"hf"`` (:class:`~llmcore.generation.hf.HFBackend`), ``"vllm"``
            (:class:`~llmcore.generation.vllm_backend.VLLMBackend`) or ``"openai"``
            (:class:`~llmcore.generation.openai_http.OpenAIBackend`; needs ``base_url=``).
        model: model name/path (or a loaded ``PreTrainedModel`` for ``"hf"``); for ``"openai"``
            the model name the server knows.
        **kwargs: passed to the backend's constructor.

    Raises:
        ConfigError: unknown backend name, or ``"openai"`` without ``base_url``.
        MissingExtraError: the backend's optional dependency is not installed.
    """
    if name == "hf":
        from llmcore.generation.hf import HFBackend

        return HFBackend(model, **kwargs)
    if name == "vllm":
        from llmcore.generation.vllm_backend import VLLMBackend

        if not isinstance(model, str):
            raise ConfigError(f"the vllm backend needs a model name or path, got {type(model)}")
        return VLLMBackend(model, **kwargs)
    if name == "openai":
        from llmcore.generation.openai_http import OpenAIBackend

        if "base_url" not in kwargs:
            raise ConfigError("the openai backend needs base_url=, e.g. 'http://127.0.0.1:8000/v1'")
        if not isinstance(model, str):
            raise ConfigError(f"the openai backend needs a model name, got {type(model)}")
        return OpenAIBackend(model=model, **kwargs)
    raise ConfigError(f"unknown generation backend {name!r}; valid: {', '.join(BACKEND_NAMES)}")
