"""Side-by-side benchmark FP, RTN, QuaRot-style, SpinQuant-style
and ReSpinQuant at W4A4 and W3A3 on the tiny outlier model, plus the online-overhead throughput
measurement (hidden 1024, 8 layers, seq 256) and calibration-time ratio."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from respin_quant.config import BenchConfig, QuantConfig, RotationConfig


def _timed_ppl(model: nn.Module, ids: torch.Tensor) -> tuple[float, float]:
    from respin_quant.evaluate import perplexity

    t0 = time.perf_counter()
    p = perplexity(model, ids, seqlen=ids.shape[1], batch_size=64)
    return p, time.perf_counter() - t0


def _disk_bytes(model: nn.Module, quantized: bool, dtype: torch.dtype = torch.float16) -> int:
    """Bytes of the weight file a checkpoint of ``model`` takes on disk (packed when quantised;
    ``save_pretrained`` in ``dtype`` otherwise)."""
    import copy
    import tempfile

    from respin_quant.packing import PACKED_FILE
    from respin_quant.pipeline import save_quantized

    with tempfile.TemporaryDirectory() as tmp:
        if quantized:
            save_quantized(model, tmp)
            return (Path(tmp) / PACKED_FILE).stat().st_size
        copy.deepcopy(model).to(dtype).save_pretrained(tmp)
        return (Path(tmp) / "model.safetensors").stat().st_size


def quality_bench(cfg: BenchConfig, progress: bool = True) -> list[dict[str, Any]]:
    from dataclasses import replace

    from respin_quant.baselines import quantized_arm
    from respin_quant.learn import learn_rotations
    from respin_quant.ptq import weight_bytes
    from respin_quant.rotation import init_rotations, online_state
    from respin_quant.tiny import TinySpec, calib_ids, eval_ids, outlier_model

    spec = TinySpec()
    ev, cal = eval_ids(spec), calib_ids(spec)
    rows: list[dict[str, Any]] = []
    for trip in cfg.settings.split(","):
        wb, ab, s = trip.split(":")
        q = QuantConfig(
            w_bits=int(wb), a_bits=int(ab), w_clip_grid=cfg.w_clip_grid, w_clip_min=cfg.w_clip_min
        )
        model = outlier_model(float(s), spec)
        fp_ppl, fp_t = _timed_ppl(model, ev)
        wb_fp = weight_bytes(model, None)
        fp16_disk = _disk_bytes(model, quantized=False)
        rows.append(
            {
                "setting": q.label,
                "S": float(s),
                "method": "fp32",
                "ppl": fp_ppl,
                "ppl_ratio": 1.0,
                "calib_s": 0.0,
                "latency_ratio": 1.0,
                "online_macs_per_token": 0,
                "linear_bytes": wb_fp["linear_fp16"] * 2,
                "fp16_linear_bytes": wb_fp["linear_fp16"],
                "checkpoint_bytes": _disk_bytes(model, False, torch.float32),
                "fp16_checkpoint_bytes": fp16_disk,
            }
        )
        rot = RotationConfig(
            steps=cfg.steps,
            lr=cfg.lr,
            batch_size=cfg.batch_size,
            calib_nsamples=cal.shape[0],
            calib_seqlen=cal.shape[1],
            rotation_seed=cfg.rotation_seed,
        )
        t0 = time.perf_counter()
        rs_sq = learn_rotations(model, cal, replace(rot, method="spinquant"), q)
        t_sq = time.perf_counter() - t0
        t0 = time.perf_counter()
        rs_re = learn_rotations(model, cal, replace(rot, method="respin"), q)
        t_re = time.perf_counter() - t0
        arms = [
            ("rtn", None, 0, 0.0),
            ("quarot", init_rotations(model, "quarot", cfg.rotation_seed), 0, 0.0),
            ("spinquant", rs_sq, 0, t_sq),
            (f"respin r={cfg.rank}", rs_re, cfg.rank, t_re),
            ("respin r=full", rs_re, "full", t_re),
            ("respin r=0", rs_re, 0, t_re),
        ]
        for name, rs, r, t_cal in arms:
            m = quantized_arm(model, q, rs, residual_rank=r)
            p, t = _timed_ppl(m, ev)
            st = online_state(m)
            macs = 0
            if st is not None:
                mm = st.macs_per_token(_dims(m))
                macs = mm["transition_macs"]
            wbq = weight_bytes(m, q)
            rows.append(
                {
                    "setting": q.label,
                    "S": float(s),
                    "method": name,
                    "ppl": p,
                    "ppl_ratio": p / fp_ppl,
                    "calib_s": t_cal,
                    "latency_ratio": t / fp_t,
                    "online_macs_per_token": macs,
                    "linear_bytes": wbq["linear_packed"],
                    "fp16_linear_bytes": wbq["linear_fp16"],
                    "checkpoint_bytes": _disk_bytes(m, quantized=True),
                    "fp16_checkpoint_bytes": fp16_disk,
                }
            )
            if progress:
                print(f"  {q.label} {name:<16} ppl {p:.4f}", flush=True)
    return rows


def _dims(m: nn.Module) -> Any:
    from respin_quant.arch import check_model

    return check_model(m)


def throughput_bench(cfg: BenchConfig) -> dict[str, Any]:
    """tokens/s of the fused FP model with no / rank-r / dense transitions ."""
    import copy

    from transformers import LlamaConfig, LlamaForCausalLM

    from respin_quant.hadamard import random_orthogonal
    from respin_quant.rotation import apply_rotations, init_rotations

    D = cfg.thr_hidden
    heads = max(1, D // 128)
    lc = LlamaConfig(
        vocab_size=256,
        hidden_size=D,
        num_hidden_layers=cfg.thr_layers,
        num_attention_heads=heads,
        intermediate_size=cfg.thr_intermediate,
        max_position_embeddings=cfg.thr_seq,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    base = LlamaForCausalLM(lc).eval()
    rs = init_rotations(base, "respin", 0)
    g = torch.Generator().manual_seed(1)
    rs.R_ffn = [random_orthogonal(D, g) for _ in rs.R_ffn]  # layer-wise bases: every T != I
    q_rs = init_rotations(base, "quarot", 0)
    variants = {
        "quarot (no transitions)": apply_rotations(copy.deepcopy(base), q_rs, 0),
        f"respin r={cfg.rank}": apply_rotations(copy.deepcopy(base), rs, cfg.rank),
        "dense exact T": apply_rotations(copy.deepcopy(base), rs, "full"),
    }
    ids = torch.randint(0, 256, (1, cfg.thr_seq), generator=g)
    times: dict[str, list[float]] = {k: [] for k in variants}
    with torch.no_grad():
        for m in variants.values():
            m(ids)
        for _ in range(cfg.thr_repeats):
            for k, m in variants.items():
                t0 = time.perf_counter()
                m(ids)
                times[k].append(time.perf_counter() - t0)
    tps = {k: cfg.thr_seq / statistics.median(v) for k, v in times.items()}
    ref = tps["quarot (no transitions)"]
    L, r, F = cfg.thr_layers, cfg.rank, lc.intermediate_size
    lin = L * (4 * D * D + 3 * D * F)
    return {
        "config": {"hidden": D, "layers": L, "seq": cfg.thr_seq, "intermediate": F, "rank": r},
        "tokens_per_s": tps,
        "ratio_vs_quarot": {k: v / ref for k, v in tps.items()},
        "online_macs_per_token": {
            f"respin r={r}": 2 * L * (2 * D * r + r * r),
            "dense exact T": 2 * L * D * D,
        },
        "linear_macs_per_token": lin,
    }


def run_bench(
    cfg: BenchConfig,
    json_out: str | Path | None = None,
    plot_out: str | Path | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    prev = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        rows = quality_bench(cfg, progress)
        thr = throughput_bench(cfg) if cfg.throughput else None
    finally:
        torch.set_num_threads(prev)
    calib = {}
    for setting in sorted({r["setting"] for r in rows}):
        sq = next(
            r["calib_s"] for r in rows if r["setting"] == setting and r["method"] == "spinquant"
        )
        re_ = next(
            r["calib_s"]
            for r in rows
            if r["setting"] == setting and r["method"].startswith("respin")
        )
        calib[setting] = {"spinquant_s": sq, "respin_s": re_, "ratio": re_ / sq}
    result = {"rows": rows, "throughput": thr, "calibration": calib, "config": cfg.__dict__}
    if json_out:
        from llmcore.data import atomic_write_json

        atomic_write_json(json_out, result)
    if plot_out:
        plot(rows, plot_out)
    return result


def format_table(result: dict[str, Any]) -> str:
    lines = [
        "| setting | method | PPL | PPL / FP | calib s | latency / FP | online MACs/token "
        "| linear bytes (packed) | checkpoint on disk |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['setting']} (S={r['S']:g}) | {r['method']} | {r['ppl']:.3f} | {r['ppl_ratio']:.3f} | "
            f"{r['calib_s']:.1f} | {r['latency_ratio']:.2f} | {r['online_macs_per_token']:,} | "
            f"{r['linear_bytes']:,} ({r['linear_bytes'] / r['fp16_linear_bytes']:.2f}x fp16) | "
            f"{r['checkpoint_bytes']:,} ({r['checkpoint_bytes'] / r['fp16_checkpoint_bytes']:.2f}x fp16) |"
        )
    for k, v in result["calibration"].items():
        lines.append(
            f"\ncalibration {k}: ReSpin {v['respin_s']:.1f} s vs SpinQuant {v['spinquant_s']:.1f} s "
            f"= {v['ratio']:.2f}x"
        )
    thr = result.get("throughput")
    if thr:
        c = thr["config"]
        lines.append(
            f"\nthroughput (FP fused, hidden {c['hidden']}, {c['layers']} layers, seq {c['seq']}, batch 1):"
        )
        lines.append("| variant | tokens/s | ratio vs QuaRot-style | online MACs/token |")
        lines.append("|---|---|---|---|")
        for k, v in thr["tokens_per_s"].items():
            lines.append(
                f"| {k} | {v:.0f} | {thr['ratio_vs_quarot'][k]:.3f} | "
                f"{thr['online_macs_per_token'].get(k, 0):,} |"
            )
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: str | Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    settings = sorted({r["setting"] for r in rows})
    methods = [r["method"] for r in rows if r["setting"] == settings[0]]
    fig, ax = plt.subplots(figsize=(8, 4))
    w = 0.8 / len(settings)
    for j, s in enumerate(settings):
        vals = [
            next(r["ppl"] for r in rows if r["setting"] == s and r["method"] == m) for m in methods
        ]
        ax.bar([i + j * w for i in range(len(methods))], vals, width=w, label=s)
    ax.set_xticks(
        [i + w * (len(settings) - 1) / 2 for i in range(len(methods))], methods, rotation=20
    )
    ax.set_ylabel("perplexity (tiny Markov Llama)")
    ax.set_yscale("log")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


__all__ = ["BenchConfig", "format_table", "json", "run_bench"]
