"""Exception hierarchy of respin-quant: everything derives from :class:`RespinError`, itself an
:class:`llmcore.errors.LLMCoreError`, so one ``except LLMCoreError`` (and every llmcore-based
CLI) catches them."""

from __future__ import annotations

from llmcore.errors import ConfigError, LLMCoreError


class RespinError(LLMCoreError):
    """Base class of every error raised on purpose by respin-quant."""


class RespinConfigError(RespinError, ConfigError):
    """A configuration value is out of range or inconsistent (bits, ranks, group sizes...)."""


class UnsupportedModelError(RespinError, NotImplementedError):
    """The model architecture is not one respin-quant can rotate (see ``SUPPORTED_MODEL_TYPES``)."""


class RotationError(RespinError, ValueError):
    """Rotations that do not fit the model, are not orthogonal, or were applied twice."""


class CalibrationDataError(RespinError, ValueError):
    """Calibration or evaluation data that is too short, too small or unreadable."""
