"""Wall-clock targets of the probe against a plain SDPA forward (perf tier, run serially)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.perf


@pytest.mark.parametrize("T,target", [(64, 3.0), (512, 4.0)])
def test_probe_overhead_vs_plain_forward(T, target):
    from sink_probe.bench import _spawn

    plain = _spawn("zoo:tiny-llama", "plain", T, 1, 3)
    streamed = _spawn("zoo:tiny-llama", "probe", T, 1, 3)
    ratio = streamed["seconds"] / plain["seconds"]
    print(T, plain, streamed, ratio)
    assert ratio <= target
