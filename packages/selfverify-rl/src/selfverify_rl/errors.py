"""Errors raised by selfverify-rl (all subclass :class:`llmcore.errors.LLMCoreError`)."""

from __future__ import annotations

from llmcore.errors import ConfigError, DataError, LLMCoreError


class SelfVerifyError(LLMCoreError):
    """Base class of every error selfverify-rl raises on purpose."""


class SelfVerifyConfigError(SelfVerifyError, ConfigError):
    """A training or evaluation setting is invalid (names the value and the fix)."""


class SelfVerifyDataError(SelfVerifyError, DataError):
    """Task data is malformed: missing columns, conflicting answers, over-long questions."""


class UnsupportedTRLError(SelfVerifyError, ImportError):
    """The installed trl lacks the GRPO hook this package overrides."""
