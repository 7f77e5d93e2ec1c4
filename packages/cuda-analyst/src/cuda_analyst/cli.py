"""``cuda-analyst`` command line: eval-kernel, evolve, freeze, intervene, replay, attribute,
bench. ``--help`` imports neither torch nor transformers."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path


def _backend(args: argparse.Namespace):
    from cuda_analyst.backends import get_backend
    from cuda_analyst.sandbox import Sandbox

    return get_backend(args.backend, sandbox=Sandbox(allow_unisolated=args.allow_unisolated))


def _add_backend(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--backend",
        default="c",
        help="c (CPU stand-in for CUDA), numpy, numba, triton-interpret (correctness only), "
        "cuda-compile-only (nvcc --ptx) or nvrtc-compile-only",
    )
    p.add_argument("--allow-unisolated", action="store_true",
                   help="run generated code with resource limits only when namespaces/uid drop are unavailable")  # fmt: skip


def _add_llm(p: argparse.ArgumentParser, default: str | None = "mock") -> None:
    p.add_argument("--llm", default=default, required=default is None,
                   help="mock[:weak], hf:PATH_OR_ID, vllm:PATH_OR_ID or openai:URL#MODEL (key from $OPENAI_API_KEY)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0)


def _evaluators(tasks: set[str], args: argparse.Namespace):
    from cuda_analyst.evaluator import EvalCache, Evaluator
    from cuda_analyst.tasks import get_task

    be = _backend(args)
    cache = EvalCache(Path(args.cache) if getattr(args, "cache", None) else None)
    return {t: Evaluator(get_task(t), be, cache=cache) for t in tasks}


def cmd_eval_kernel(args: argparse.Namespace) -> int:
    from cuda_analyst.evaluator import Evaluator
    from cuda_analyst.feedback import build_reports
    from cuda_analyst.masks import AnalysisMask
    from cuda_analyst.tasks import get_task

    src = Path(args.file).read_text()
    be = _backend(args)
    if be.name.endswith("compile-only"):
        r = be.compile(src)
        if r.workdir is not None:
            import shutil

            shutil.rmtree(r.workdir, ignore_errors=True)
        print(
            json.dumps(
                {"backend": be.name, "status": "PASS-COMPILE" if r.ok else "FAIL", "log": r.log},
                indent=1,
            )
        )
        return 0 if r.ok else 1
    if args.kernelbench:
        from cuda_analyst.kernelbench import from_kernelbench

        base = Path(args.kernelbench_baseline).read_text() if args.kernelbench_baseline else None
        task = from_kernelbench(args.kernelbench, baseline_src=base, sandbox=be.sandbox)
    else:
        task = get_task(args.task)
    res = Evaluator(task, be).evaluate(src)
    reports = build_reports(
        task, src, res, AnalysisMask(plan=3, d=3, a=3, p=3, r=3 if args.reference else 0)
    )
    out = {"backend": res.backend, "task": task.name, "signature": task.signature, "status": res.status,
           "combined_score": res.combined_score, "timing": res.timing,
           "suspicious": res.suspicious, "error": res.error, "isolation": res.isolation,
           "reports": [{"name": r.name, "text": r.decision_text()} for r in reports]}  # fmt: skip
    print(json.dumps(out, indent=1))
    return 0


def cmd_evolve(args: argparse.Namespace) -> int:
    from cuda_analyst.llm import make_llm
    from cuda_analyst.masks import AnalysisMask
    from cuda_analyst.trajectory import evolve

    ev = _evaluators({args.task}, args)[args.task]
    mask = AnalysisMask.parse(args.mask) if args.mask else None
    out = evolve(ev, make_llm(args.llm), args.output, generations=args.generations, population=args.population,
                 children=args.children, mask=mask, seed=args.seed)  # fmt: skip
    print(f"checkpoints: {out / 'checkpoints'} (backend {ev.backend.name})")
    return 0


def cmd_freeze(args: argparse.Namespace) -> int:
    from cuda_analyst.trajectory import group_llm4ad_by_gen, group_openevolve_by_gen

    if args.llm4ad:
        files = group_llm4ad_by_gen(args.llm4ad, args.output, task=args.task or "")
    else:
        if not args.checkpoints:
            raise SystemExit(
                "cuda-analyst freeze: give a checkpoint folder or --llm4ad samples.json"
            )
        files = group_openevolve_by_gen(args.checkpoints, args.output)
    print(f"{len(files)} frozen samples in {args.output}")
    return 0


def _run_intervene(args: argparse.Namespace, masks, replay_from=None) -> int:
    from cuda_analyst.intervene import intervene
    from cuda_analyst.llm import make_llm
    from cuda_analyst.trajectory import load_frozen

    samples = load_frozen(args.frozen)
    evs = _evaluators({s.get("task") or args.task for s in samples}, args)
    res = intervene(samples, masks, make_llm(args.llm), evs, num_run=args.num_run, num_trials=args.num_trials,
                    out_dir=args.output, replay_from=replay_from, seed=args.seed,
                    misaligned=getattr(args, "misaligned", False), placebo=getattr(args, "placebo", False),
                    progress=True)  # fmt: skip
    from cuda_analyst.attribution import label_stats

    for m, runs in res.items():
        st = label_stats(runs, ("fast", "pass"))["all"]
        print(
            f"{m}: pass+fast rate {st['mean']:.3f} +- {st['std']:.3f} over {st['n']} rollouts (backend c, CPU)"
        )
    return 0


def cmd_intervene(args: argparse.Namespace) -> int:
    from cuda_analyst.masks import parse_masks

    return _run_intervene(args, parse_masks(args.masks, args.players.split(",")))


def cmd_replay(args: argparse.Namespace) -> int:
    src = Path(args.mask_dir)
    return _run_intervene(args, [src.name], replay_from=src)


def cmd_attribute(args: argparse.Namespace) -> int:
    from cuda_analyst.attribution import attribute
    from cuda_analyst.intervene import load_results

    att = attribute(load_results(args.gen_dir), players=args.players.split(","), metric=args.metric,
                    method=args.method, interactions=args.interactions)  # fmt: skip
    text = json.dumps(att.to_json(), indent=1)
    if args.output:
        Path(args.output).write_text(text)
    print(text if not args.output else f"attribution -> {args.output}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from cuda_analyst.bench import run_bench

    run_bench(json_out=args.json_out, plot=args.plot, quick=args.quick)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cuda-analyst",
        description="Frozen-trajectory attribution of feedback-to-plan decisions in kernel agents.",
    )
    sub = p.add_subparsers(dest="command", required=True)

    e = sub.add_parser("eval-kernel", help="evaluate one candidate: status, score, all feedback")
    e.add_argument("file")
    e.add_argument("--task", default="softmax_rows")
    e.add_argument("--reference", action="store_true", help="also show the reference-code player")
    e.add_argument("--kernelbench", default=None, metavar="PROBLEM.py",
                   help="task from a KernelBench problem file (its Model runs with CPU torch in the sandbox)")  # fmt: skip
    e.add_argument("--kernelbench-baseline", default=None, metavar="BASE.c",
                   help="C baseline to time against (without it: correctness only)")  # fmt: skip
    _add_backend(e)
    e.set_defaults(func=cmd_eval_kernel)

    v = sub.add_parser(
        "evolve", help="run the minimal evolver (writes OpenEvolve-style checkpoints)"
    )
    v.add_argument("--task", required=True)
    v.add_argument("--generations", type=int, default=8)
    v.add_argument("--population", type=int, default=8)
    v.add_argument("--children", type=int, default=4)
    v.add_argument("--mask", default=None, help="inject this mask's decision block while evolving")
    v.add_argument("-o", "--output", required=True)
    v.add_argument("--cache", default=None, help="folder for the evaluation cache")
    _add_backend(v)
    _add_llm(v)
    v.set_defaults(func=cmd_evolve)

    f = sub.add_parser("freeze", help="group a checkpoint by generation into frozen samples")
    f.add_argument("checkpoints", nargs="?")
    f.add_argument("--llm4ad", default=None, help="LLM4AD samples JSON instead of a checkpoint")
    f.add_argument("--task", default=None, help="task name for LLM4AD samples")
    f.add_argument("-o", "--output", required=True)
    f.set_defaults(func=cmd_freeze)

    for name, helptext in (("intervene", "re-plan every frozen sample under each mask"),
                           ("replay", "re-sample with another LLM from a run's recorded decisions")):  # fmt: skip
        i = sub.add_parser(name, help=helptext)
        if name == "intervene":
            i.add_argument("frozen")
            i.add_argument(
                "--masks", default="all8", help="all8 or comma-separated masks (p7-d3-a3-p3,...)"
            )
            i.add_argument("--players", default="d,a,p")
            i.add_argument(
                "--misaligned", action="store_true", help="reports from another program (control)"
            )
            i.add_argument("--placebo", action="store_true", help="content-free plan (control)")
        else:
            i.add_argument(
                "mask_dir", help="an intervene output's mask folder, e.g. gen/mm/p7-d3-a3-p3"
            )
            i.add_argument("--frozen", required=True, help="the frozen samples the source run used")
        i.add_argument("--task", default=None)
        i.add_argument("--num-run", type=int, default=3)
        i.add_argument("--num-trials", type=int, default=5)
        i.add_argument("-o", "--output", required=True)
        i.add_argument("--cache", default=None)
        _add_backend(i)
        _add_llm(i)
        i.set_defaults(func=cmd_intervene if name == "intervene" else cmd_replay)

    a = sub.add_parser(
        "attribute", help="Shapley / Banzhaf attribution and synergy from mask results"
    )
    a.add_argument("gen_dir")
    a.add_argument(
        "--metric",
        default="pass_or_better",
        help="fail, compile, pass, fast, compile_or_better, pass_or_better",
    )
    a.add_argument("--players", default="d,a,p")
    a.add_argument("--method", default="shapley", choices=["shapley", "banzhaf", "sampled"])
    a.add_argument(
        "--interactions", default="official", choices=["official", "shapley", "mobius", "none"]
    )
    a.add_argument("-o", "--output", default=None)
    a.set_defaults(func=cmd_attribute)

    b = sub.add_parser(
        "bench",
        help="CPU benchmark: evaluator throughput, timing, frozen vs end-to-end, exact vs sampled",
    )
    b.add_argument("--json-out", default=None)
    b.add_argument("--plot", default=None, help="PNG path (needs the 'plot' extra)")
    b.add_argument("--quick", action="store_true", help="2 tasks instead of 4")
    b.set_defaults(func=cmd_bench)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from llmcore.cli import run_main

    return run_main("cuda-analyst", build_parser, argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
