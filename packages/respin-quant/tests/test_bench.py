from respin_quant.bench import format_table, throughput_bench
from respin_quant.config import BenchConfig


def test_throughput_bench_small():
    cfg = BenchConfig(
        thr_hidden=128, thr_layers=2, thr_seq=32, thr_intermediate=256, thr_repeats=2, rank=8
    )
    res = throughput_bench(cfg)
    assert set(res["tokens_per_s"]) == {"quarot (no transitions)", "respin r=8", "dense exact T"}
    assert res["online_macs_per_token"]["respin r=8"] == 2 * 2 * (2 * 128 * 8 + 64)
    assert res["online_macs_per_token"]["dense exact T"] == 2 * 2 * 128 * 128
    table = format_table({"rows": [], "calibration": {}, "throughput": res})
    assert "tokens/s" in table
