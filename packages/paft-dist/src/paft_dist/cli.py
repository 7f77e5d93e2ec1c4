"""``paft-dist`` command line: train, compare, bench, theory, inject-check.

Every option is a field of an options dataclass below; llmcore.config turns the fields into flags
and reads ``--config FILE`` (YAML, JSON or TOML with the same field names) first, so a flag typed
on the command line always beats the file. Errors of this package (and of llmcore) print
``paft-dist: error: ...`` and exit 2 (llmcore.cli.run_main). ``paft-dist --help`` does not import
torch (heavy imports live inside the commands). `train` spawns --nproc local gloo processes, or
runs in place when launched by torchrun.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from llmcore.cli import run_main
from llmcore.config import add_config_arguments, config_from_args
from paft_dist.errors import PAFTConfigError

PROG = "paft-dist"


@dataclass
class TrainOptions:
    """Training run, PAFT and fault-injection options."""

    # training
    model: str = field(default="mlp", metadata={"help": "mlp | tiny-lm | HF causal-LM id/path"})
    optimizer: Literal["sgd", "momentum", "adam", "adamw"] = "sgd"
    lr: float = field(default=0.05, metadata={"help": "learning rate"})
    momentum: float = field(default=0.9, metadata={"help": "momentum of 'momentum'"})
    weight_decay: float = 0.0
    steps: int = 600
    batch_size: int = field(default=32, metadata={"help": "per rank"})
    nproc: int = field(default=2, metadata={"help": "local processes (ignored under torchrun)"})
    backend: Literal["gloo", "nccl"] = "gloo"
    grad_clip: float | None = field(default=None, metadata={"help": "clip grad norm (baseline)"})
    seed: int = 0
    eval_every: int = field(default=50, metadata={"help": "divergence every k steps"})
    checkpoint_every: int | None = field(default=None, metadata={"help": "checkpoint period"})
    seq_len: int = field(default=64, metadata={"help": "LM sequence length"})
    out: Path = field(default=Path("paft-out"), metadata={"help": "output directory"})
    # PAFT
    mode: Literal["ddp", "sync", "dyn", "averager"] = field(
        default="dyn", metadata={"help": "ddp | sync (PAFT-Sync) | dyn (PAFT-Dyn) | averager"}
    )
    sync_every: int = field(default=10, metadata={"help": "H (initial H for dyn)"})
    h_min: int = 1
    h_max: int = 100
    dyn_policy: Literal["snr", "snr_raw", "budget"] = "snr"
    overlap: bool | None = field(
        default=None, metadata={"help": "overlap the sync with the next step (None: dyn only)"}
    )
    sync_state: Literal["none", "momentum", "all"] = field(
        default="all", metadata={"help": "optimizer state averaged with the parameters"}
    )
    state_sync_every: int = 1
    reduce: Literal["mean", "median", "majority"] = "mean"
    nonfinite: Literal["exclude", "raise", "ignore"] = "exclude"
    verify_sync: bool = False
    trigger: Literal["schedule", "checksum", "both"] = "schedule"
    # fault injection
    fault: Literal["none", "gaussian", "bitflip", "scale", "zero"] = "none"
    fault_ranks: str = field(default="all", metadata={"help": "'all' or e.g. 0,2"})
    sigma: float | None = field(default=None, metadata={"help": "gaussian std (default 0.1)"})
    variance: float | None = field(
        default=None, metadata={"help": "gaussian per-element variance (instead of sigma)"}
    )
    bits: str = field(default="23-30", metadata={"help": "bitflip bits, e.g. 30 or 23-30"})
    num_elements: int | None = None
    fraction: float = 1.0
    factor: float = field(default=-20.0, metadata={"help": "scale factor"})
    prob: float = 1.0
    every: int = 1
    burst_every: int | None = None
    burst_sigma: float | None = None
    fault_start: int = 0
    fault_end: int | None = None
    inject_at: Literal["pre_step", "comm_hook"] = "pre_step"
    fault_seed: int = 0

    def __post_init__(self) -> None:
        if self.sigma is not None and self.variance is not None:
            raise PAFTConfigError(
                f"give sigma ({self.sigma}) or variance ({self.variance}), not both"
            )


@dataclass
class CompareOptions(TrainOptions):
    """Training, PAFT and fault options, plus the PAFT-Sync periods to compare."""

    sync_hs: str = field(default="1,10,50", metadata={"help": "PAFT-Sync periods to compare"})


@dataclass
class BenchOptions(TrainOptions):
    """Training, PAFT and fault options of the benchmark (4 ranks, 300 steps by default)."""

    nproc: int = field(default=4, metadata={"help": "local processes (ignored under torchrun)"})
    steps: int = 300
    out: Path = field(default=Path("paft-bench"), metadata={"help": "output directory"})
    repeats: int = field(default=3, metadata={"help": "repeats (step time: median)"})


@dataclass
class InjectCheckOptions(TrainOptions):
    """A few DDP steps with the fault injector (defaults: x(-20) on rank 1 every 5 steps)."""

    steps: int = 20
    mode: Literal["ddp", "sync", "dyn", "averager"] = "ddp"
    fault: Literal["none", "gaussian", "bitflip", "scale", "zero"] = "scale"
    fault_ranks: str = field(default="1", metadata={"help": "'all' or e.g. 0,2"})
    every: int = 5


@dataclass
class TheoryOptions:
    """Predicted replica divergence of noisy DDP with SGD."""

    d: int = field(metadata={"help": "number of parameters"})
    sigma: float = field(metadata={"help": "per-element noise std"})
    world_size: int = field(metadata={"help": "number of replicas M"})
    lr: float = field(metadata={"help": "constant learning rate"})
    steps: int = field(metadata={"help": "steps"})
    points: int = field(default=10, metadata={"help": "rows of the table"})


def _fault_from(o: TrainOptions) -> Any:
    from paft_dist.config import FaultSpec

    if o.fault == "none":
        return []
    if o.variance is not None:
        if o.fault != "gaussian":
            raise PAFTConfigError(f"variance is a gaussian option; fault={o.fault!r}")
        sigma_kw: dict[str, Any] = {"kind": "gaussian"}
        make = FaultSpec.from_variance
        args: tuple[float, ...] = (o.variance,)
    else:
        sigma_kw = {"kind": o.fault, "sigma": 0.1 if o.sigma is None else o.sigma}
        make = FaultSpec
        args = ()
    burst = (o.burst_every, o.burst_sigma) if o.burst_every is not None else None
    if o.burst_every is not None and o.burst_sigma is None:
        raise PAFTConfigError("burst_every needs burst_sigma (the std of the large burst)")
    return [
        make(
            *args,
            **sigma_kw,
            fraction=o.fraction,
            bits=o.bits,
            num_elements=o.num_elements,
            factor=o.factor,
            prob=o.prob,
            every=o.every,
            start_step=o.fault_start,
            end_step=o.fault_end,
            burst=burst,
            ranks=o.fault_ranks,
            where=o.inject_at,
            seed=o.fault_seed,
        )
    ]


def experiment_from_options(o: TrainOptions) -> Any:
    """The ExperimentConfig that `train` runs for these options (WORLD_SIZE wins under torchrun)."""
    import os

    from paft_dist.config import ExperimentConfig, PAFTConfig

    paft = PAFTConfig(
        mode=o.mode,
        sync_every=o.sync_every,
        h_min=o.h_min,
        h_max=o.h_max,
        dyn_policy=o.dyn_policy,
        overlap=o.overlap,
        sync_optimizer_state=o.sync_state,
        state_sync_every=o.state_sync_every,
        reduce=o.reduce,
        nonfinite=o.nonfinite,
        verify_sync=o.verify_sync,
        trigger=o.trigger,
    )
    world = int(os.environ.get("WORLD_SIZE", o.nproc))
    return ExperimentConfig(
        model=o.model,
        optimizer=o.optimizer,
        lr=o.lr,
        momentum=o.momentum,
        weight_decay=o.weight_decay,
        steps=o.steps,
        batch_size=o.batch_size,
        world_size=world,
        backend=o.backend,
        paft=paft,
        faults=_fault_from(o),
        grad_clip=o.grad_clip,
        seed=o.seed,
        eval_every=o.eval_every,
        checkpoint_every=o.checkpoint_every,
        seq_len=o.seq_len,
    )


def options_from_args(ns: argparse.Namespace) -> Any:
    """The options dataclass of the chosen subcommand: defaults, then --config, then flags."""
    return config_from_args(ns.options_cls, ns)


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

    o = options_from_args(ns)
    cfg = experiment_from_options(o)
    os.environ.setdefault("PAFT_PROGRESS", "1")
    res = run_experiment(cfg, o.out)
    if _is_rank0():
        print(_HEAD)
        print(_summary_line(o.mode, res.summary))
        print(f"results in {o.out}/ (summary.json, metrics.rank*.jsonl, events.jsonl)")
    return 0


def cmd_compare(ns: argparse.Namespace) -> int:
    from paft_dist.baselines import compare_configs
    from paft_dist.trainer import run_experiments

    o = options_from_args(ns)
    base = experiment_from_options(o)
    try:
        hs = tuple(int(h) for h in o.sync_hs.split(","))
    except ValueError:
        raise PAFTConfigError(
            f"sync_hs={o.sync_hs!r}: use comma-separated ints, e.g. 1,10,50"
        ) from None
    cfgs = compare_configs(base, hs, grad_clip=o.grad_clip or 1.0)
    out = o.out
    out.mkdir(parents=True, exist_ok=True)
    dirs = [out / n.replace(" ", "_").replace("=", "").replace("+", "") for n in cfgs]
    results = run_experiments(list(cfgs.values()), dirs)
    if not _is_rank0():
        return 0
    lines = [_HEAD] + [_summary_line(n, r.summary) for n, r in zip(cfgs, results, strict=True)]
    md = "\n".join(lines) + "\n"
    (out / "compare.md").write_text(md)
    with (out / "compare.csv").open("w") as f:
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

    o = options_from_args(ns)
    base = experiment_from_options(o)
    faults = _fault_from(o) or [FaultSpec(kind="gaussian", sigma=0.1)]
    rep = run_bench(base, faults[0], o.out, repeats=o.repeats)
    if _is_rank0():
        print(format_table(rep["rows"]))
        print(f"wrote {o.out}/bench.json, bench.md and bench.png (with the 'plot' extra)")
    return 0


def cmd_theory(ns: argparse.Namespace) -> int:
    from paft_dist.monitor import predicted_divergence

    o = options_from_args(ns)
    if o.points < 1 or o.steps < 1:
        raise PAFTConfigError(f"points={o.points} and steps={o.steps} must be >= 1")
    print("| step | predicted max ||theta^m - theta_bar|| |\n|---|---|")
    for i in range(1, o.points + 1):
        t = max(1, round(o.steps * i / o.points))
        d = predicted_divergence(o.d, o.sigma, o.world_size, [o.lr] * t)
        print(f"| {t} | {d:.4g} |")
    return 0


def cmd_inject_check(ns: argparse.Namespace) -> int:
    import tempfile

    from paft_dist.trainer import run_experiments

    base = experiment_from_options(options_from_args(ns))
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


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog=PROG,
        description="PAFT: fault-tolerant data-parallel training against silent gradient "
        "corruption (torch.distributed; gloo on CPU, nccl on GPU). Every command takes "
        "--config FILE (same field names as the flags); typed flags override the file.",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    commands = (
        ("train", TrainOptions, cmd_train, "train with PAFT (spawns --nproc, or under torchrun)"),
        ("compare", CompareOptions, cmd_compare, "fault-free/noisy/clipped DDP vs PAFT-Sync/Dyn"),
        ("bench", BenchOptions, cmd_bench, "step time, bytes, loss, divergence, memory"),
        ("theory", TheoryOptions, cmd_theory, "predicted divergence of noisy DDP"),
        ("inject-check", InjectCheckOptions, cmd_inject_check, "only targets hit, reproducible"),
    )
    for name, cls, func, help_ in commands:
        p = sub.add_parser(name, help=help_, description=cls.__doc__)
        add_config_arguments(p, cls)
        p.set_defaults(func=func, options_cls=cls)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: PAFT and llmcore errors print `paft-dist: error: ...` and return 2."""
    return run_main(PROG, build_parser, argv)


if __name__ == "__main__":
    sys.exit(main())
