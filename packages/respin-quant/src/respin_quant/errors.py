"""Exception hierarchy of respin-quant: everything derives from :class:`RespinError`."""

from __future__ import annotations


class RespinError(Exception):
    """Base class of every error raised on purpose by respin-quant."""


class RespinConfigError(RespinError, ValueError):
    """A configuration value is out of range or inconsistent (bits, ranks, group sizes...)."""


class UnsupportedModelError(RespinError, NotImplementedError):
    """The model architecture is not one respin-quant can rotate (see ``SUPPORTED_MODEL_TYPES``)."""


class RotationError(RespinError, ValueError):
    """Rotations that do not fit the model, are not orthogonal, or were applied twice."""


class CalibrationDataError(RespinError, ValueError):
    """Calibration or evaluation data that is too short, too small or unreadable."""
