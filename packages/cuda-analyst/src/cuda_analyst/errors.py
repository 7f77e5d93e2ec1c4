"""Exception hierarchy of cuda-analyst: catch :class:`CudaAnalystError` for every deliberate error."""

from __future__ import annotations

from llmcore.errors import LLMCoreError


class CudaAnalystError(LLMCoreError):
    """Base class of every error cuda-analyst raises on purpose."""


class AnalystValueError(CudaAnalystError, ValueError):
    """A bad argument: player or component name, mode bits, mask string, tolerance, signature."""


class FrozenDataError(CudaAnalystError, ValueError):
    """A frozen trajectory or a results folder cannot be used (counts say why)."""


class IsolationError(CudaAnalystError):
    """The sandbox cannot enforce its isolation here; the message says what is missing."""


class ToolUnavailableError(CudaAnalystError):
    """A GPU-only part or an external tool (nvcc, ncu, compute-sanitizer, a device) is missing."""
