"""Generation backends behind one interface.

``get_backend("hf" | "vllm" | "openai", model, **kwargs)`` builds a backend whose
``generate(prompts, SamplingParams(...))`` returns ``result[i][j]``: sample ``j`` of prompt ``i``.
Importing this package is cheap: torch, transformers, vllm and openai are imported only when a
backend is constructed.
"""

from __future__ import annotations

from llmcore.generation.base import (
    BACKEND_NAMES,
    Completion,
    FinishReason,
    GenerationBackend,
    SamplingParams,
    get_backend,
)
from llmcore.generation.hf import HFBackend
from llmcore.generation.openai_http import OpenAIBackend
from llmcore.generation.vllm_backend import VLLMBackend, vllm_sampling_kwargs

__all__ = [
    "BACKEND_NAMES",
    "Completion",
    "FinishReason",
    "GenerationBackend",
    "HFBackend",
    "OpenAIBackend",
    "SamplingParams",
    "VLLMBackend",
    "get_backend",
    "vllm_sampling_kwargs",
]
