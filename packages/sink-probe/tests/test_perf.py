"""Wall-clock targets of the probe against a plain SDPA forward (perf tier, run serially): one
process alternates 10 plain forwards with 10 probes on the same batch; fastest of each."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.perf


@pytest.mark.parametrize("T,target", [(64, 3.0), (512, 4.0)])
def test_probe_overhead_vs_plain_forward(T, target):
    from sink_probe.bench import _spawn

    streamed = _spawn("zoo:tiny-llama", "probe", T, 1, 10)
    ratio = streamed["ratio"]  # fastest probe / fastest plain SDPA forward, interleaved
    print(T, streamed, ratio)
    assert ratio <= target
