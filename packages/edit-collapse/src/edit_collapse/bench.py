"""Side-by-side benchmark on the world model: edit latency per request (MEMIT at batch 1 and a
large batch), retrieval append and inference overhead (prompt tokens, gate pass, latency ratio
to the unedited and the edited model), capability retention against latency ratio, delta bytes
per editor, and the CPU targets (100 MEMIT edits < 60 s, retrieval <= 1.5x, solve < 50 ms)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any


def _gen_time(model: Any, tok: Any, queries: list[str], n_new: int = 2) -> float:
    from edit_collapse import metrics as M

    t0 = time.perf_counter()
    M.greedy(model, tok, queries, n_new)
    return (time.perf_counter() - t0) / len(queries)


def run_bench(out: str | Path | None = "bench.json", plot: str | Path | None = None, n_batch: int = 100,
              n_seq: int = 10) -> dict[str, Any]:  # fmt: skip
    """Run the benchmark, print the table, write JSON (and the plot with the ``plot`` extra)."""
    import torch

    from edit_collapse import core, tiny
    from edit_collapse import world as W
    from edit_collapse.experiments import load_session, session_entry, world_editor
    from edit_collapse.requests import world_requests

    torch.set_num_threads(1)
    entry = tiny.build_world_model()
    world = W.make_world(tiny.N_ENTITIES, tiny.N_RELATIONS, 0)
    model, tok = entry.load()
    model.requires_grad_(True)
    n_batch = min(n_batch, len(world.facts))
    reqs = world_requests(world, n_batch, seed=11)
    res: dict[str, Any] = {
        "model": entry.name,
        "facts": len(world.facts),
        "latency_ms": {},
        "delta_bytes": {},
    }
    for m in ("ft-m", "rome", "memit", "alphaedit", "retrieval"):
        ed = world_editor(m, world)
        ed.apply(model, tok, reqs[:1]).restore()  # warm-up: context templates and statistics
        h = ed.apply(model, tok, reqs[:n_seq], sequential=True)
        res["latency_ms"][f"{m} (batch 1)"] = 1000 * h.time_s / n_seq
        res["delta_bytes"][m] = (
            h.delta_bytes() if getattr(ed, "parametric", True) else sum(len(f) for f in ed.memory)
        )
        h.restore()
    ed = world_editor("memit", world)
    c0 = time.process_time()
    h = ed.apply(model, tok, reqs, sequential=False)
    res["latency_ms"][f"memit (batch {n_batch})"] = 1000 * h.time_s / n_batch
    res["memit_batch_total_s"] = h.time_s
    # one torch thread: the process's CPU time is the wall time of an idle core
    res["memit_batch_cpu_s"] = time.process_time() - c0
    K = torch.randn(n_batch, 512)
    t0 = time.perf_counter()
    ed._solve(model, tok, 1, K, torch.randn(n_batch, 128))
    res["solve_ms"] = 1000 * (time.perf_counter() - t0)
    h.restore()
    # retrieval overhead on held-out queries: half edited subjects, half untouched
    queries = [r.prompt for r in reqs[:10]] + [f.prompt(1) for f in world.facts[-10:]]
    rt = world_editor("retrieval", world)
    rt.apply(model, tok, reqs[:50])
    gen = rt.wrap(model, tok)
    base = _gen_time(model, tok, queries)
    t_rt = _gen_time(gen, tok, queries)
    memit = world_editor("memit", world)
    hm = memit.apply(model, tok, reqs[:10], sequential=False)
    t_ed = _gen_time(model, tok, queries)
    hm.restore()
    extra = [len(core.encode(tok, gen.transform(q))) - len(core.encode(tok, q)) for q in queries]
    t0 = time.perf_counter()
    rt.relevant(model, tok, queries[0], rt.retrieve(model, tok, queries[0]))
    res["retrieval"] = {"extra_prompt_tokens": sum(extra) / len(extra), "gate_ms": 1000 * (time.perf_counter() - t0),
                        "latency_ratio_unedited": t_rt / base, "latency_ratio_edited": t_rt / t_ed}  # fmt: skip
    sessions = {}
    for m in ("ft-m", "rome", "memit", "alphaedit", "retrieval"):
        s = load_session(session_entry(m, world_entry=entry))
        sessions[m] = s["rows"]
    res["sessions"] = sessions
    res["retention_vs_latency"] = {
        m: {
            "retention_T50": rows[-1].get("retention"),
            "avg_T50": rows[-1]["avg"],
            "latency_ratio": t_rt / base if m == "retrieval" else t_ed / base,
        }
        for m, rows in sessions.items()
    }
    res["targets"] = {"memit_100_edits_under_60s": res["memit_batch_cpu_s"] * 100 / n_batch < 60,
                      "retrieval_overhead_le_1.5x": res["retrieval"]["latency_ratio_unedited"] <= 1.5,
                      "solve_under_50ms": res["solve_ms"] < 50}  # fmt: skip
    print(table(res))
    if out:
        from llmcore.data import atomic_write_json

        atomic_write_json(out, json.loads(json.dumps(res, default=float)))
    if plot:
        save_plot(res, plot)
    return res


def table(res: dict[str, Any]) -> str:
    lines = ["| editor | latency / request (ms) | delta bytes |", "|---|---|---|"]
    for k, v in res["latency_ms"].items():
        m = k.split(" ")[0]
        lines.append(
            f"| {k} | {v:.1f} | {res['delta_bytes'].get(m, '') if 'batch 1)' in k else ''} |"
        )
    r = res["retrieval"]
    lines += ["", "| retrieval overhead | value |", "|---|---|",
              f"| extra prompt tokens | {r['extra_prompt_tokens']:.1f} |", f"| gate pass (ms) | {r['gate_ms']:.1f} |",
              f"| latency ratio vs unedited | {r['latency_ratio_unedited']:.2f} |",
              f"| latency ratio vs MEMIT-edited | {r['latency_ratio_edited']:.2f} |",
              "", "| method | retention at T=50 | Average at T=50 | latency ratio |", "|---|---|---|---|"]  # fmt: skip
    for m, v in res["retention_vs_latency"].items():
        lines.append(
            f"| {m} | {v['retention_T50']:.3f} | {v['avg_T50']:.3f} | {v['latency_ratio']:.2f} |"
        )
    if "memit_batch_cpu_s" in res:
        lines += [
            "",
            f"MEMIT batch: {res['memit_batch_cpu_s']:.1f} CPU s, {res['memit_batch_total_s']:.1f} s wall",
        ]
    lines += ["", "targets: " + ", ".join(f"{k}={v}" for k, v in res["targets"].items())]
    return "\n".join(lines)


def save_plot(res: dict[str, Any], path: str | Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        from edit_collapse.errors import EditInputError

        raise EditInputError("--plot needs pip install 'edit-collapse[plot]'") from e
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.5))
    for m, rows in res["sessions"].items():
        t = [r["n_edits"] for r in rows]
        ax[0].plot(t, [r["retention"] for r in rows], marker="o", label=m)
        ax[1].plot(t, [r["avg"] for r in rows], marker="o", label=m)
    for a, y in zip(ax, ("reasoning retention", "Average (Rel, Gen, Loc, Port)"), strict=True):
        a.set_xscale("log")
        a.set_xlabel("number of sequential edits T")
        a.set_ylabel(y)
    ax[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
