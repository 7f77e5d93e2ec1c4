"""`paft-dist bench`: fault-free DDP vs PAFT-Sync H=10 vs PAFT-Dyn, with and without faults, in
one process group: step-time ratio to DDP (median of repeats), exact communication
accounting, final loss, replica divergence over time, peak memory per rank; table, JSON, PNG."""

from __future__ import annotations

import json
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

from paft_dist.config import ExperimentConfig, FaultSpec, PAFTConfig
from paft_dist.trainer import run_experiments

METHODS = {
    "DDP": PAFTConfig(mode="ddp"),
    "PAFT-Sync H=10": PAFTConfig(mode="sync", sync_every=10),
    "PAFT-Dyn": PAFTConfig(mode="dyn"),
}


def run_bench(
    base: ExperimentConfig,
    fault: FaultSpec,
    out_dir: str | Path,
    repeats: int = 3,
) -> dict[str, Any]:
    """All (method, faults) pairs x repeats in one spawn; returns rows + curves, writes JSON/MD/PNG."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names, cfgs, dirs = [], [], []
    for rep in range(repeats):
        for faulty in (False, True):
            for mname, pc in METHODS.items():
                names.append((mname, faulty, rep))
                cfgs.append(replace(base, paft=pc, faults=[fault] if faulty else []))
                dirs.append(out / "runs" / f"{mname.replace(' ', '_')}-{int(faulty)}-{rep}")
    results = run_experiments(cfgs, dirs)
    rows: list[dict[str, Any]] = []
    curves: dict[str, Any] = {}
    param_bytes = None
    for mname, pc in METHODS.items():
        for faulty in (False, True):
            rs = [
                r for (n, f, _), r in zip(names, results, strict=True) if n == mname and f == faulty
            ]
            step_ms = [statistics.median(m["step_time_ms"] for m in r.metrics[0]) for r in rs]
            r0 = rs[0]
            s = r0.summary
            param_bytes = s["bytes_grad"] // base.steps
            k = {"sgd": 0, "momentum": 1}.get(base.optimizer, 2)
            if pc.mode == "ddp" or pc.sync_optimizer_state == "none":
                k = 0
            extra = max((e["bytes"] for e in r0.sync_events), default=0)
            rows.append(
                {
                    "method": mname,
                    "faults": faulty,
                    "step_ms": statistics.median(step_ms),
                    "bytes_sync_over_grad": s["sync_ratio"],
                    "syncs": s["syncs"] or 0,
                    "final_h": s["final_h"],
                    "worst_test_loss": max(s["test_loss"]),
                    "averaged_model_loss": s["averaged_model_loss"],
                    "max_divergence": s["max_divergence"],
                    "peak_rss_mb": max(s["peak_rss_mb"]),
                    "extra_buffer_bytes": extra,
                    "extra_buffer_bound": (1 + k) * param_bytes if pc.mode != "ddp" else 0,
                }
            )
            curves[f"{mname}{' +faults' if faulty else ''}"] = {
                "step": [m["step"] for m in r0.metrics[0] if "divergence" in m],
                "divergence": [m["divergence"] for m in r0.metrics[0] if "divergence" in m],
                "loss": [m["loss"] for m in r0.metrics[0]],
            }
    base_ms = {
        f: next(r["step_ms"] for r in rows if r["method"] == "DDP" and r["faults"] == f)
        for f in (False, True)
    }
    for r in rows:
        r["step_ratio"] = r["step_ms"] / base_ms[r["faults"]]
    report = {
        "config": {
            "model": base.model,
            "optimizer": base.optimizer,
            "lr": base.lr,
            "steps": base.steps,
            "world_size": base.world_size,
            "repeats": repeats,
            "fault": fault.__dict__ | {"bits": list(fault.bits)},
        },
        "param_bytes": param_bytes,
        "rows": rows,
        "curves": curves,
    }
    (out / "bench.json").write_text(json.dumps(report, indent=1, default=str))
    (out / "bench.md").write_text(format_table(rows))
    _plot(curves, out / "bench.png")
    return report


def format_table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| method | faults | step ms | ratio to DDP | bytes_sync/bytes_grad | syncs | final H "
        "| worst-rank test loss | max divergence | peak RSS MB | extra buffer B (bound) |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r['method']} | {'yes' if r['faults'] else 'no'} | {r['step_ms']:.2f} | "
        f"{r['step_ratio']:.2f} | {r['bytes_sync_over_grad']:.3f} | {r['syncs']} | "
        f"{r['final_h'] if r['final_h'] is not None else '-'} | {r['worst_test_loss']:.4f} | "
        f"{r['max_divergence']:.3g} | {r['peak_rss_mb']:.0f} | "
        f"{r['extra_buffer_bytes']} ({r['extra_buffer_bound']}) |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"


def _plot(curves: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for name, c in curves.items():
        a.plot(c["step"], c["divergence"], label=name)
        w = 20
        sm = [
            sum(c["loss"][max(0, i - w) : i + 1]) / len(c["loss"][max(0, i - w) : i + 1])
            for i in range(len(c["loss"]))
        ]
        b.plot(range(1, len(sm) + 1), sm, label=name)
    a.set_xlabel("step")
    a.set_ylabel("max ||theta^m - theta_bar||")
    b.set_xlabel("step")
    b.set_ylabel("train loss (rank 0, smoothed)")
    a.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
