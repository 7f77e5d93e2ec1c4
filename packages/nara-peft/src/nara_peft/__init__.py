"""NaRA: Noise-Aware LoRA for parameter-efficient fine-tuning of masked diffusion LLMs.

Wang, Zhuang, Huang, Zhang (ICML 2026, arXiv 2605.29716). Importing this package registers the
``NARA`` PEFT type, so ``get_peft_model`` / ``PeftModel.from_pretrained`` work as for LoRA.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from llmcore.lazy import lazy_exports
from llmcore.registry import MethodInfo

try:
    __version__ = version("nara-peft")
except PackageNotFoundError:  # pragma: no cover
    __version__ = "0.0.0"

METHOD = MethodInfo(
    name="nara-peft",
    paper="NaRA: Noise-Aware LoRA for Parameter-Efficient Fine-Tuning of Diffusion LLMs (ICML 2026)",
    summary="LoRA whose r x r core C(lambda) is generated per noise level by one shared "
    "hypernetwork; fine-tunes masked diffusion LMs",
    demo="nara_peft.demo:run",
    package="nara-peft",
    tags=("peft", "diffusion-lm", "lora"),
)

_LAZY = {
    "NaraConfig": ".config",
    "NaraPeftType": ".config",
    "reference_config": ".config",
    "NaraModel": ".model",
    "noise_context": ".model",
    "core_matrix": ".model",
    "stage1": ".model",
    "smoothness_penalty": ".model",
    "NaraLinear": ".layer",
    "NaraLayer": ".layer",
    "compute_noise_level": ".noise",
    "noise_density": ".noise",
    "register": ".register",
    "get_nara_model": ".api",
    "diffusion_sft_loss": ".diffusion",
    "generate": ".diffusion",
    "NaraDiffusionTrainer": ".trainer",
    "NaraError": ".errors",
    "NaraConfigError": ".errors",
    "NaraNoiseLevelError": ".errors",
    "NaraMergeError": ".errors",
    "NaraDataError": ".errors",
    "NaraVersionError": ".errors",
}

__all__ = ["METHOD", "__version__", *_LAZY]

if TYPE_CHECKING:
    from nara_peft.api import get_nara_model  # noqa: F401
    from nara_peft.config import NaraConfig, NaraPeftType, reference_config  # noqa: F401
    from nara_peft.model import NaraModel, core_matrix, noise_context  # noqa: F401


class _RegisterAfterPeft(importlib.abc.MetaPathFinder):
    """Registers NARA right after ``peft`` is imported, so ``import nara_peft`` stays torch-free."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "peft":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec("peft")
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def _exec(module: Any) -> None:
            exec_module(module)
            try:
                importlib.import_module("nara_peft.register").register()
            except ImportError as e:
                if type(e).__name__ == "NaraVersionError":
                    raise
                # peft was imported by a nara_peft module mid-import; model.py registers

        spec.loader.exec_module = _exec  # type: ignore[method-assign]
        return spec


if "peft" in sys.modules:
    importlib.import_module("nara_peft.register").register()
elif not any(isinstance(f, _RegisterAfterPeft) for f in sys.meta_path):
    sys.meta_path.insert(0, _RegisterAfterPeft())


_lazy_getattr, __dir__ = lazy_exports(__name__, _LAZY)


def __getattr__(name: str) -> Any:
    """Lazy export; anything beyond the error classes also makes sure NARA is registered."""
    value = _lazy_getattr(name)
    if _LAZY[name] != ".errors":
        importlib.import_module("nara_peft.register").register()
    return value
