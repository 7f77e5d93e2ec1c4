"""Side-by-side cost of the EDL learners against plain fine-tuning with the same steps.

One process, the toy base, ``n`` ``teach`` examples: (a) a plain loop with the online learner's
R * n replay steps, (b) ``compute_edl(mode="online")``; (c) a plain one-epoch loop and TRL's
``SFTTrainer`` against ``mode="single_pass"`` with and without the extra eval forward; (d)
``mode="blockwise"``. Also ``code_lengths`` throughput and peak resident memory per mode.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any


def _reset_peak() -> None:
    import contextlib

    with contextlib.suppress(OSError):  # Linux: "5" resets the peak resident set size (VmHWM)
        Path("/proc/self/clear_refs").write_text("5")


def _peak_mb() -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _timed(fn) -> tuple[Any, float, float | None]:
    import gc

    gc.collect()
    _reset_peak()
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0, _peak_mb()


def _plain_loop(model, tok, rows, cfg, *, online: bool) -> None:
    """Plain fine-tuning with the learner's optimiser and batches, no coding or evaluation."""
    from excess_dl.data import normalize_examples
    from excess_dl.edl import _Run

    run = _Run(
        model, tok, normalize_examples(rows, tok), normalize_examples(rows[:1], tok), cfg, ""
    )
    learn = run.fresh()
    opt = run.optimizer(learn)
    n = len(rows)
    step = 0
    if online:
        rng = random.Random(cfg.seed)
        for i in range(1, n + 1):
            for _ in range(cfg.replay_steps):
                extra = [rng.randrange(i) for _ in range(min(cfg.batch_size, i) - 1)]
                step += 1
                run.step(learn, opt, [i - 1, *extra], step, i)
    else:
        for s in range(0, n, cfg.batch_size):
            step += 1
            run.step(learn, opt, list(range(s, min(s + cfg.batch_size, n))), step, s)


def _trl_epoch(model, tok, rows, batch_size: int) -> None:
    import copy

    import trl
    from datasets import Dataset

    from excess_dl.integrations.trl import edl_sft_config

    data = [{"prompt": r["prompt"], "completion": " " + r["completion"]} for r in rows]
    trainer = trl.SFTTrainer(
        model=copy.deepcopy(model),
        args=edl_sft_config(per_device_train_batch_size=batch_size, disable_tqdm=True),
        train_dataset=Dataset.from_list(data),
        processing_class=tok,
    )
    trainer.train()


def run_bench(
    n: int = 128,
    *,
    json_out: str | Path | None = None,
    plot: str | Path | None = None,
    trl: bool = True,
    model: Any = None,
    tokenizer: Any = None,
) -> dict[str, Any]:
    """Time ratios against plain fine-tuning, peak memory, and ``code_lengths`` tokens/s;
    prints a table, writes JSON and (with matplotlib) a plot of EDL against loss-gap closed."""
    import torch

    from excess_dl.config import EDLConfig
    from excess_dl.edl import compute_edl
    from excess_dl.scoring import code_lengths
    from excess_dl.toy import CipherSuite, pretrain_base

    suite = CipherSuite()
    if model is None:
        model, tokenizer = pretrain_base(suite)
    tok = tokenizer
    rows = suite.task_examples("teach", n, random.Random(0))
    test = suite.test_examples("teach")
    base = EDLConfig(accuracy=False)
    res: dict[str, Any] = {"n": n, "test_size": len(test), "threads": torch.get_num_threads()}
    modes: dict[str, dict[str, Any]] = {}

    def record(name: str, fn, baseline: str | None = None) -> Any:
        out, sec, peak = _timed(fn)
        modes[name] = {"seconds": sec, "peak_rss_mb": peak, "baseline": baseline}
        print(f"  {name}: {sec:.2f} s", flush=True)
        return out

    record(
        "plain loop (R*n replay steps)", lambda: _plain_loop(model, tok, rows, base, online=True)
    )
    curve_teach = record(
        "online",
        lambda: compute_edl(model, rows, test, base, tok, task="teach"),
        "plain loop (R*n replay steps)",
    )
    # single-pass: one test evaluation (at n), so the ratio measures the coding overhead
    sp = EDLConfig(mode="single_pass", accuracy=False, checkpoints=[n])
    record("plain epoch", lambda: _plain_loop(model, tok, rows, sp, online=False))
    if trl:
        try:
            record("TRL SFTTrainer epoch", lambda: _trl_epoch(model, tok, rows, sp.batch_size))
        except ImportError:
            print("  (TRL not installed: skipped)")
    record(
        "single_pass (eval forward)", lambda: compute_edl(model, rows, test, sp, tok), "plain epoch"
    )
    sp2 = EDLConfig(mode="single_pass", eval_forward=False, accuracy=False, checkpoints=[n])
    record(
        "single_pass (reused loss)", lambda: compute_edl(model, rows, test, sp2, tok), "plain epoch"
    )
    bw = EDLConfig(mode="blockwise", accuracy=False)
    record(
        "blockwise",
        lambda: compute_edl(model, rows, test, bw, tok),
        "plain loop (R*n replay steps)",
    )
    for m in modes.values():
        b = m.pop("baseline")
        m["ratio"] = m["seconds"] / modes[b]["seconds"] if b else 1.0
        m["vs"] = b
    # scoring throughput
    n_tok = sum(len(tok(r["completion"], add_special_tokens=False)["input_ids"]) for r in test)
    code_lengths(model, tok, test[:16])
    t0 = time.perf_counter()
    code_lengths(model, tok, test, batch_size=16)
    res["code_lengths_tokens_per_s"] = n_tok / (time.perf_counter() - t0)
    res["modes"] = modes
    print(format_bench(res))
    if json_out:
        from llmcore.data import atomic_write_json

        atomic_write_json(json_out, res)
    if plot:
        curve_elicit = compute_edl(
            model,
            suite.task_examples("elicit", n, random.Random(0)),
            suite.test_examples("elicit"),
            base,
            tok,
            task="elicit",
        )
        plot_curves([curve_elicit, curve_teach], plot)
    return res


def format_bench(res: dict[str, Any]) -> str:
    lines = [
        f"n={res['n']} train, |T|={res['test_size']}, {res['threads']} thread(s)",
        "| mode | seconds | ratio | vs | peak RSS (MB) |",
        "|---|---|---|---|---|",
    ]
    for name, m in res["modes"].items():
        peak = "n/a" if m["peak_rss_mb"] is None else f"{m['peak_rss_mb']:.0f}"
        lines.append(
            f"| {name} | {m['seconds']:.2f} | {m['ratio']:.2f} | {m['vs'] or '-'} | {peak} |"
        )
    lines.append(f"code_lengths: {res['code_lengths_tokens_per_s']:.0f} completion tokens/s")
    return "\n".join(lines)


def plot_curves(curves, path: str | Path) -> bool:
    """EDL (log x) against loss-gap closed, one line per (task, method); needs the ``plot``
    extra (matplotlib). Returns False (and says so) without it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed (pip install 'excess-dl[plot]'): no plot written")
        return False
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for c in curves:
        xs = [max(p.edl_bits, 1.0) for p in c.points]
        ys = [p.loss_gap_closed for p in c.points]
        ax.plot(xs, ys, marker="o", label=f"{c.task}/{c.method}")
    ax.set_xscale("log")
    ax.set_xlabel("EDL (bits, clipped at 1 for the log axis)")
    ax.set_ylabel("loss-gap closed G(n)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps(run_bench(), indent=1, default=str))
