"""llmcore: the small shared core of the ICML 2026 method packages.

Importing ``llmcore`` is cheap (no torch); the names below resolve lazily on first use.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from llmcore.lazy import lazy_exports

try:
    __version__ = version("icml26-llmcore")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0"

_LAZY = {
    "load_causal_lm": "llmcore.models",
    "load_tokenizer": "llmcore.models",
    "load_model_and_tokenizer": "llmcore.models",
    "set_seed": "llmcore.runtime",
    "select_device": "llmcore.runtime",
    "select_dtype": "llmcore.runtime",
    "num_threads": "llmcore.runtime",
    "setup_logging": "llmcore.runtime",
    "MethodInfo": "llmcore.registry",
    "discover": "llmcore.registry",
    "get_method": "llmcore.registry",
    "SamplingParams": "llmcore.generation",
    "Completion": "llmcore.generation",
    "get_backend": "llmcore.generation",
    "read_jsonl": "llmcore.data",
    "write_jsonl": "llmcore.data",
    "ResultsWriter": "llmcore.data",
}
_SUBMODULES = (
    "cli",
    "config",
    "data",
    "diffusion",
    "errors",
    "fixtures",
    "generation",
    "hooks",
    "lmeval",
    "metrics",
    "models",
    "registry",
    "rl",
    "runtime",
    "zoo",
)

__all__ = [
    "Completion",
    "MethodInfo",
    "ResultsWriter",
    "SamplingParams",
    "__version__",
    "discover",
    "get_backend",
    "get_method",
    "load_causal_lm",
    "load_model_and_tokenizer",
    "load_tokenizer",
    "num_threads",
    "read_jsonl",
    "select_device",
    "select_dtype",
    "set_seed",
    "setup_logging",
    "write_jsonl",
]

if TYPE_CHECKING:
    from llmcore.data import ResultsWriter, read_jsonl, write_jsonl
    from llmcore.generation import Completion, SamplingParams, get_backend
    from llmcore.models import load_causal_lm, load_model_and_tokenizer, load_tokenizer
    from llmcore.registry import MethodInfo, discover, get_method
    from llmcore.runtime import num_threads, select_device, select_dtype, set_seed, setup_logging


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, submodules=_SUBMODULES)
