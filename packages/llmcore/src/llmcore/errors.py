"""Exception hierarchy of llmcore.

Every error llmcore raises on bad input derives from :class:`LLMCoreError`, so callers (and CLIs)
can catch one class and print a clear message instead of a deep traceback.
"""

from __future__ import annotations


class LLMCoreError(Exception):
    """Base class of every error llmcore raises on purpose."""


class ConfigError(LLMCoreError, ValueError):
    """A configuration value is invalid (names the field, the value and what is allowed)."""


class ModelLoadError(LLMCoreError):
    """A model or tokenizer path/id does not exist or does not hold a loadable model."""


class DataError(LLMCoreError, ValueError):
    """Input data is malformed (names the file and, for JSONL, the 1-based line)."""


class BackendError(LLMCoreError):
    """A generation backend failed or was asked for something it cannot do."""


class MissingExtraError(LLMCoreError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, feature: str, extra: str, package: str = "icml26-llmcore") -> None:
        super().__init__(
            f"{feature} needs the optional extra '{extra}': pip install '{package}[{extra}]'"
        )
        self.extra = extra


class ZooError(LLMCoreError):
    """A tiny-model recipe could not be built."""


class QualityGateError(ZooError):
    """A tiny model finished training but missed the quality gate its recipe declares."""


class RegistryError(LLMCoreError):
    """A method registration is invalid or a method name is unknown."""
