"""Error classes: every error raised on bad input derives from :class:`CircuitPrintError`."""

from __future__ import annotations

from llmcore.errors import LLMCoreError


class CircuitPrintError(LLMCoreError):
    """Base class of the errors circuitprint raises on purpose."""


class UnsupportedModelError(CircuitPrintError):
    """The model's layout has no gateable MLP or attention projection (or no transcoder)."""


class ProbeError(CircuitPrintError, ValueError):
    """Too few confident probe prompts or families."""


class SignatureError(CircuitPrintError):
    """No essential supernode, too few triggers, or a malformed signature file."""


class VerificationError(CircuitPrintError, ValueError):
    """Bad verification settings (r0, p_max, mode) or a suspect that cannot answer them."""


class MergeError(CircuitPrintError, ValueError):
    """Models that cannot be merged (different shapes or tokenizers) or absent LoRA targets."""
