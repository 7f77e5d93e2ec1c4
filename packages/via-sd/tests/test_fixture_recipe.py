"""The target fixture's stage-2 gate policy: train in extra chunks only while the gate is
missed, at most a fixed number of times (via_sd.tiny.train_to_gate)."""

from __future__ import annotations

import pytest
from via_sd.tiny import STAGE2_MAX_EXTENSIONS, train_to_gate


def _run(scores: list[float], gate: float = 0.9, max_ext: int = STAGE2_MAX_EXTENSIONS):
    seen: list[int] = []
    it = iter(scores)
    value, k = train_to_gate(lambda: next(it), seen.append, gate, max_ext)
    return value, k, seen


def test_no_extension_when_the_gate_passes_at_once():
    # the cached fixture's case: the weights are those of the 1,000-step recipe
    assert _run([0.922]) == (0.922, 0, [])


def test_extends_until_the_gate_passes():
    assert _run([0.844, 0.88, 0.91]) == (0.91, 2, [1, 2])


@pytest.mark.parametrize("max_ext", [0, 1, 4])
def test_gives_up_after_max_extensions(max_ext):
    value, k, seen = _run([0.5] * (max_ext + 1), max_ext=max_ext)
    assert (value, k, seen) == (0.5, max_ext, list(range(1, max_ext + 1)))
