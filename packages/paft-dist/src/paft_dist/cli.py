"""``paft-dist`` command line: train, compare, bench, theory, inject-check.

``paft-dist --help`` does not import torch (heavy imports live inside the commands).
`train` spawns --nproc local gloo processes, or runs in place when launched by torchrun.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _train_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("training")
    g.add_argument("--config", type=Path, default=None, help="YAML/JSON with the flags below")
    g.add_argument("--model", default="mlp", help="mlp | tiny-lm | HF causal-LM id/path")
    g.add_argument("--optimizer", default="sgd", choices=["sgd", "momentum", "adam", "adamw"])
    g.add_argument("--lr", type=float, default=0.05, help="learning rate")
    g.add_argument("--momentum", type=float, default=0.9, help="momentum of 'momentum'")
    g.add_argument("--weight-decay", type=float, default=0.0)
    g.add_argument("--steps", type=int, default=600)
    g.add_argument("--batch-size", type=int, default=32, help="per rank")
    g.add_argument("--nproc", type=int, default=2, help="local processes (ignored under torchrun)")
    g.add_argument("--backend", default="gloo", choices=["gloo", "nccl"])
    g.add_argument("--grad-clip", type=float, default=None, help="clip grad norm (baseline)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--eval-every", type=int, default=50, help="divergence every k steps")
    g.add_argument("--checkpoint-every", type=int, default=None, help="checkpoint period")
    g.add_argument("--seq-len", type=int, default=64, help="LM sequence length")
    g.add_argument("--out", type=Path, default=Path("paft-out"), help="output directory")
    g = p.add_argument_group("PAFT")
    g.add_argument("--mode", default="dyn", choices=["ddp", "sync", "dyn", "averager"])
    g.add_argument("--sync-every", type=int, default=10, help="H (initial H for dyn)")
    g.add_argument("--h-min", type=int, default=1)
    g.add_argument("--h-max", type=int, default=100)
    g.add_argument("--dyn-policy", default="snr", choices=["snr", "snr_raw", "budget"])
    g.add_argument("--overlap", action=argparse.BooleanOptionalAction, default=None)
    g.add_argument("--sync-state", default="all", choices=["none", "momentum", "all"])
    g.add_argument("--state-sync-every", type=int, default=1)
    g.add_argument("--reduce", default="mean", choices=["mean", "median", "majority"])
    g.add_argument("--nonfinite", default="exclude", choices=["exclude", "raise", "ignore"])
    g.add_argument("--verify-sync", action="store_true")
    g.add_argument("--trigger", default="schedule", choices=["schedule", "checksum", "both"])
    _fault_flags(p)


def _fault_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("fault injection (inject options)")
    g.add_argument(
        "--fault", default="none", choices=["none", "gaussian", "bitflip", "scale", "zero"]
    )
    g.add_argument("--fault-ranks", default="all", help="'all' or e.g. 0,2")
    s = g.add_mutually_exclusive_group()
    s.add_argument("--sigma", type=float, default=None, help="gaussian std")
    s.add_argument("--variance", type=float, default=None, help="gaussian per-element variance")
    g.add_argument("--bits", default="23-30", help="bitflip candidate bits, e.g. 30 or 23-30")
    g.add_argument("--num-elements", type=int, default=None)
    g.add_argument("--fraction", type=float, default=1.0)
    g.add_argument("--factor", type=float, default=-20.0, help="scale factor")
    g.add_argument("--prob", type=float, default=1.0)
    g.add_argument("--every", type=int, default=1)
    g.add_argument("--burst-every", type=int, default=None)
    g.add_argument("--burst-sigma", type=float, default=None)
    g.add_argument("--fault-start", type=int, default=0)
    g.add_argument("--fault-end", type=int, default=None)
    g.add_argument("--inject-at", default="pre_step", choices=["pre_step", "comm_hook"])
    g.add_argument("--fault-seed", type=int, default=0)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="paft-dist",
        description="PAFT: fault-tolerant data-parallel training against silent gradient "
        "corruption (torch.distributed; gloo on CPU, nccl on GPU)",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("train", help="train with PAFT (spawns --nproc, or under torchrun)")
    _train_flags(p)
    p = sub.add_parser("compare", help="fault-free / noisy / clipped DDP vs PAFT-Sync H / PAFT-Dyn")
    _train_flags(p)
    p.add_argument("--sync-hs", default="1,10,50", help="PAFT-Sync periods to compare")
    p = sub.add_parser("bench", help="step time, bytes, loss, divergence, memory (spec §7)")
    _train_flags(p)
    p.add_argument("--repeats", type=int, default=3)
    p.set_defaults(nproc=4, steps=300, out=Path("paft-bench"))
    p = sub.add_parser("theory", help="predicted divergence of noisy DDP (spec §2.2)")
    p.add_argument("--d", type=int, required=True, help="number of parameters")
    p.add_argument("--sigma", type=float, required=True, help="per-element noise std")
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--points", type=int, default=10)
    p = sub.add_parser("inject-check", help="a few steps: only target ranks change, reproducible")
    _train_flags(p)
    p.set_defaults(steps=20, mode="ddp", fault="scale", fault_ranks="1", every=5)
    return ap


def _fault_from(ns: argparse.Namespace) -> Any:
    from paft_dist.config import FaultSpec

    if ns.fault == "none":
        return []
    sigma = (
        ns.sigma
        if ns.sigma is not None
        else (ns.variance**0.5 if ns.variance is not None and ns.variance >= 0 else 0.1)
    )
    if ns.variance is not None and ns.variance < 0:
        sigma = -1.0
    burst = (ns.burst_every, ns.burst_sigma) if ns.burst_every is not None else None
    return [
        FaultSpec(
            kind=ns.fault,
            sigma=sigma,
            fraction=ns.fraction,
            bits=ns.bits,
            num_elements=ns.num_elements,
            factor=ns.factor,
            prob=ns.prob,
            every=ns.every,
            start_step=ns.fault_start,
            end_step=ns.fault_end,
            burst=burst,
            ranks=ns.fault_ranks,
            where=ns.inject_at,
            seed=ns.fault_seed,
        )
    ]


def _experiment_from(ns: argparse.Namespace) -> Any:
    import os

    from paft_dist.config import ExperimentConfig, PAFTConfig

    if ns.config is not None:
        from llmcore.config import load_config_file

        for k, v in load_config_file(ns.config).items():
            key = k.replace("-", "_")
            if not hasattr(ns, key):
                raise SystemExit(f"unknown key {k!r} in {ns.config}")
            setattr(ns, key, v)
    paft = PAFTConfig(
        mode=ns.mode,
        sync_every=ns.sync_every,
        h_min=ns.h_min,
        h_max=ns.h_max,
        dyn_policy=ns.dyn_policy,
        overlap=ns.overlap,
        sync_optimizer_state=ns.sync_state,
        state_sync_every=ns.state_sync_every,
        reduce=ns.reduce,
        nonfinite=ns.nonfinite,
        verify_sync=ns.verify_sync,
        trigger=ns.trigger,
    )
    world = int(os.environ.get("WORLD_SIZE", ns.nproc))
    return ExperimentConfig(
        model=ns.model,
        optimizer=ns.optimizer,
        lr=ns.lr,
        momentum=ns.momentum,
        weight_decay=ns.weight_decay,
        steps=ns.steps,
        batch_size=ns.batch_size,
        world_size=world,
        backend=ns.backend,
        paft=paft,
        faults=_fault_from(ns),
        grad_clip=ns.grad_clip,
        seed=ns.seed,
        eval_every=ns.eval_every,
        checkpoint_every=ns.checkpoint_every,
        seq_len=ns.seq_len,
    )


def _is_rank0() -> bool:
    import os

    return os.environ.get("RANK", "0") == "0"


def _summary_line(name: str, s: dict[str, Any]) -> str:
    return (
        f"| {name} | {max(s['test_loss']):.4f} | {s['averaged_model_loss']:.4f} | "
        f"{s['max_divergence']:.4g} | {s['syncs'] if s['syncs'] is not None else '-'} | "
        f"{s['sync_ratio']:.3f} | {'yes' if all(s['finite']) else 'NO'} |"
    )


_HEAD = (
    "| run | worst-rank test loss | averaged-model loss | max divergence | syncs | "
    "bytes_sync/bytes_grad | finite |\n|---|---|---|---|---|---|---|"
)


def cmd_train(ns: argparse.Namespace) -> int:
    import os

    from paft_dist.trainer import run_experiment

    os.environ.setdefault("PAFT_PROGRESS", "1")
    res = run_experiment(_experiment_from(ns), ns.out)
    if _is_rank0():
        print(_HEAD)
        print(_summary_line(ns.mode, res.summary))
        print(f"results in {ns.out}/ (summary.json, metrics.rank*.jsonl, events.jsonl)")
    return 0


def cmd_compare(ns: argparse.Namespace) -> int:
    from paft_dist.baselines import compare_configs
    from paft_dist.trainer import run_experiments

    base = _experiment_from(ns)
    hs = tuple(int(h) for h in ns.sync_hs.split(","))
    cfgs = compare_configs(base, hs, grad_clip=ns.grad_clip or 1.0)
    ns.out.mkdir(parents=True, exist_ok=True)
    dirs = [ns.out / n.replace(" ", "_").replace("=", "").replace("+", "") for n in cfgs]
    results = run_experiments(list(cfgs.values()), dirs)
    if not _is_rank0():
        return 0
    lines = [_HEAD] + [_summary_line(n, r.summary) for n, r in zip(cfgs, results, strict=True)]
    md = "\n".join(lines) + "\n"
    (ns.out / "compare.md").write_text(md)
    with (ns.out / "compare.csv").open("w") as f:
        f.write("run,worst_test_loss,averaged_model_loss,max_divergence,syncs,sync_ratio\n")
        for n, r in zip(cfgs, results, strict=True):
            s = r.summary
            f.write(
                f"{n},{max(s['test_loss'])},{s['averaged_model_loss']},"
                f"{s['max_divergence']},{s['syncs']},{s['sync_ratio']}\n"
            )
    print(md)
    return 0


def cmd_bench(ns: argparse.Namespace) -> int:
    from paft_dist.bench import format_table, run_bench
    from paft_dist.config import FaultSpec

    base = _experiment_from(ns)
    faults = _fault_from(ns) or [FaultSpec(kind="gaussian", sigma=0.1)]
    rep = run_bench(base, faults[0], ns.out, repeats=ns.repeats)
    if _is_rank0():
        print(format_table(rep["rows"]))
        print(f"wrote {ns.out}/bench.json, bench.md and bench.png (with the 'plot' extra)")
    return 0


def cmd_theory(ns: argparse.Namespace) -> int:
    from paft_dist.monitor import predicted_divergence

    print("| step | predicted max ||theta^m - theta_bar|| |\n|---|---|")
    for i in range(1, ns.points + 1):
        t = max(1, round(ns.steps * i / ns.points))
        d = predicted_divergence(ns.d, ns.sigma, ns.world_size, [ns.lr] * t)
        print(f"| {t} | {d:.4g} |")
    return 0


def cmd_inject_check(ns: argparse.Namespace) -> int:
    import tempfile

    from paft_dist.trainer import run_experiments

    base = _experiment_from(ns)
    base.paft.mode = "ddp"
    tmp = Path(tempfile.mkdtemp(prefix="paft-inject-"))
    a, b = run_experiments([base, base], [tmp / "a", tmp / "b"])
    if not _is_rank0():
        return 0
    same = (
        Path(a.out_dir, "events.jsonl").read_text() == Path(b.out_dir, "events.jsonl").read_text()
    )
    spec = base.faults[0] if base.faults else None
    targets = (
        set(range(base.world_size)) if spec is None or spec.ranks == "all" else set(spec.ranks)
    )
    hit = {e["rank"] for e in a.fault_events}
    ok = same and hit <= targets and (spec is None or bool(hit))
    print(
        json.dumps(
            {
                "events": len(a.fault_events),
                "ranks_hit": sorted(hit),
                "target_ranks": sorted(targets),
                "reproducible": same,
                "ok": ok,
            }
        )
    )
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    from paft_dist.errors import PAFTError

    try:
        return {
            "train": cmd_train,
            "compare": cmd_compare,
            "bench": cmd_bench,
            "theory": cmd_theory,
            "inject-check": cmd_inject_check,
        }[ns.cmd](ns)
    except PAFTError as e:
        print(f"paft-dist: error: {e}", file=sys.stderr)
        return 2
    except ValueError as e:  # config validation of dataclasses
        print(f"paft-dist: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
