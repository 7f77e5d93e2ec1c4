"""``d3llm bench``: peak-memory measurement and one small run on the demo setup."""

from __future__ import annotations

import json
import sys

import pytest


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_peak_memory_sees_an_allocation():
    import torch
    from d3llm.bench import peak_memory

    def alloc():
        x = torch.ones(64 * 2**20 // 4)  # 64 MiB of float32, touched
        return float(x[-1])

    out, mib = peak_memory(alloc)
    assert out == 1.0
    assert mib is not None and 48 <= mib <= 256
    _, idle = peak_memory(lambda: None)
    assert idle is not None and idle < 16


@pytest.mark.slow
def test_bench_demo_writes_table_json_points(tmp_path):
    """Eight prompts on the demo setup, no AR baseline, no plot: every run has a peak-memory
    figure and a ratio to vanilla, and TPF against output length has one row per answer length."""
    from d3llm.bench import run_bench
    from d3llm.metrics import read_points

    payload = run_bench(tmp_path, n=8, plot=False, ar=False, size="demo")
    runs = payload["runs"]
    assert {"teacher/vanilla", "student/multiblock-0.5-b4-kv"} <= set(runs)
    assert all(r["peak_mib"] is not None for r in runs.values())
    lengths = [r["answer tokens"] for r in payload["tpf_by_length"]]
    assert lengths == [6, 8]
    assert set(read_points(tmp_path / "points.yaml")["parity"]) == {"teacher", "student"}
    assert "mem vs van" in (tmp_path / "table.md").read_text()
    assert json.loads((tmp_path / "bench.json").read_text())["n"] == 8
