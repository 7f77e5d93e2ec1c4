"""The paper's baselines on one rotation/quantisation code path.

* ``rtn``: no rotation, RTN (or GPTQ) weights, per-token activations;
* ``quarot``: one random Hadamard R for every residual slot, random per-head Hadamards on V/O,
  online Hadamard before down_proj (QuaRot, Ashkboos et al. 2024);
* ``spinquant``: one learned global R (plus per-layer head rotations) with Cayley SGD from the
  same Hadamard initialisation (SpinQuant, Liu et al. 2025).
Each returns a fused, fake-quantised model; ``method_arm`` is the shared entry point used by
``bench`` and the tests.
"""

from __future__ import annotations

import copy
import time
from dataclasses import replace
from typing import Any

from torch import Tensor, nn

from respin_quant.config import QuantConfig, RotationConfig
from respin_quant.ptq import quantize
from respin_quant.rotation import RotationSet, apply_rotations, init_rotations


def quantized_arm(
    model: nn.Module,
    q: QuantConfig,
    rs: RotationSet | None,
    *,
    residual_rank: int | str = 0,
    rebase: bool = False,
    calib_ids: Tensor | None = None,
    online_had_down: bool = True,
    online_dense: bool = False,
    online_block: bool = False,
) -> nn.Module:
    """A fresh fused + quantised copy of ``model`` (``rs=None``: plain RTN/GPTQ)."""
    m = copy.deepcopy(model)
    if rs is not None:
        apply_rotations(
            m,
            rs,
            residual_rank,  # type: ignore[arg-type]
            rebase,
            online_had_down=online_had_down,
            online_dense=online_dense,
            online_block=online_block,
        )
    return quantize(m, q, calib_ids)


def rtn(model: nn.Module, q: QuantConfig, calib_ids: Tensor | None = None) -> nn.Module:
    """No rotation (the paper's RTN row; GPTQ if ``q.weight_quantizer == 'gptq'``)."""
    return quantized_arm(model, q, None, calib_ids=calib_ids)


def quarot(
    model: nn.Module, q: QuantConfig, seed: int = 0, calib_ids: Tensor | None = None
) -> nn.Module:
    """QuaRot-style: random Hadamard everywhere, no learning."""
    return quantized_arm(model, q, init_rotations(model, "quarot", seed), calib_ids=calib_ids)


def spinquant_rotations(
    model: nn.Module, calib_ids: Tensor, rot: RotationConfig, q: QuantConfig
) -> RotationSet:
    """SpinQuant-style global learned rotation (one R shared by every residual slot)."""
    from respin_quant.learn import learn_rotations

    return learn_rotations(model, calib_ids, replace(rot, method="spinquant"), q)


def timed(fn: Any, *a: Any, **k: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn(*a, **k)
    return out, time.perf_counter() - t0
