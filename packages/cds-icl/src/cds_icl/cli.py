"""``cds-icl`` command line: order, pool, eval, score-understandability, lm-eval-tasks, bench.

``cds-icl --help`` imports neither torch nor transformers (heavy imports live in the commands).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any


def _embedder(spec: str, base_url: str | None = None, model: Any = None, tok: Any = None) -> Any:
    from cds_icl.embed import Embedder, parse_embed_spec

    backend, name = parse_embed_spec(spec)
    if backend == "hf-mean" and name is None and model is not None:
        return Embedder("hf-mean", model=model, tokenizer=tok)
    return Embedder(backend, model=name, base_url=base_url)


def _cmd_order(args: argparse.Namespace) -> int:
    from cds_icl.config import OrderConfig
    from cds_icl.errors import CDSInputError
    from cds_icl.pool import DemoPool, OrderFile
    from cds_icl.tsp import cds_order
    from llmcore.config import config_from_args

    cfg = config_from_args(OrderConfig, args)
    if not cfg.pool:
        raise CDSInputError("cds-icl order needs --pool pool.jsonl")
    pool = DemoPool.from_jsonl(cfg.pool)
    E = _embedder(cfg.embed, cfg.base_url)(pool.texts())
    order, score = cds_order(E, cfg.strategy, n_starts=cfg.n_starts)
    OrderFile(order, score, cfg.strategy, cfg.embed.replace("/", "_"), cfg.seed, len(pool)).save(
        cfg.out
    )
    print(f"ordered {len(pool)} demos ({cfg.strategy}, score {score:.4f}) -> {cfg.out}")
    return 0


def _cmd_pool(args: argparse.Namespace) -> int:
    from cds_icl.config import PoolConfig
    from cds_icl.runner import load_task
    from llmcore.config import config_from_args

    cfg = config_from_args(PoolConfig, args)
    data = load_task(cfg.task, n_pool=cfg.n, seed=cfg.seed)
    if not cfg.model:
        data.pool.to_jsonl(cfg.out)
        print(f"wrote the reference pool ({len(data.pool)} demos) to {cfg.out}")
        return 0
    from cds_icl.prompts import POOL_INSTRUCTION
    from cds_icl.selfgen import generate_self_pool

    probs = [{"idx": d.meta["idx"], "problem": d.problem, "gold": d.answer} for d in data.pool]
    instruction = data.instruction if cfg.task == "synthetic" else POOL_INSTRUCTION
    pool = generate_self_pool(
        cfg.model, probs, variant=cfg.variant, max_attempts=cfg.max_attempts,
        temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens, backend=cfg.backend,
        task=cfg.task, instruction=instruction, chat=cfg.chat, stop=data.stop,
    )  # fmt: skip
    pool.to_jsonl(cfg.out)
    print(f"wrote a {cfg.variant} self-generated pool ({len(pool)} demos) to {cfg.out}")
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    from cds_icl.config import EvalConfig
    from cds_icl.errors import CDSInputError
    from cds_icl.pool import DemoPool, OrderFile
    from cds_icl.runner import evaluate, load_task
    from cds_icl.selectors import OrderSelector, make_selector
    from llmcore.config import config_from_args

    cfg = config_from_args(EvalConfig, args)
    if not cfg.model:
        raise CDSInputError("cds-icl eval needs --model (hub id or local path)")
    try:
        seeds = [int(s) for s in cfg.seeds.split(",") if s.strip()]
    except ValueError as e:
        raise CDSInputError(f"--seeds must be comma-separated integers, got {cfg.seeds!r}") from e
    data = load_task(cfg.task, n_pool=cfg.n_pool)
    if cfg.pool:
        data.pool = DemoPool.from_jsonl(cfg.pool)
    model: Any = cfg.model
    if cfg.backend == "hf":
        from llmcore.models import load_model_and_tokenizer

        model = load_model_and_tokenizer(cfg.model)
    if cfg.order:
        of = OrderFile.load(cfg.order)
        of.check(data.pool)
        selector: Any = OrderSelector(of.order, name=f"order:{of.strategy}")
    else:
        m, t = model if isinstance(model, tuple) else (None, None)
        selector = make_selector(cfg.selector, embedder=_embedder(cfg.embed, None, m, t),
                                 model=m, tokenizer=t)  # fmt: skip
    res = evaluate(
        model, data, selector, k=cfg.k, seeds=seeds, limit=cfg.limit, backend=cfg.backend,
        max_new_tokens=cfg.max_new_tokens, chat=cfg.chat, enable_thinking=cfg.enable_thinking,
        batch_size=cfg.batch_size, out=cfg.out, progress=True,
    )  # fmt: skip
    print(json.dumps({"acc": res.acc, "std": res.std, "per_seed": res.per_seed,
                      "selector": selector.name, "k": cfg.k}))  # fmt: skip
    return 0


def _cmd_score(args: argparse.Namespace) -> int:
    from cds_icl.config import ScoreConfig
    from cds_icl.errors import CDSInputError
    from cds_icl.pool import DemoPool
    from cds_icl.understand import understandability
    from llmcore.config import config_from_args
    from llmcore.data import write_jsonl
    from llmcore.models import load_model_and_tokenizer

    cfg = config_from_args(ScoreConfig, args)
    if not cfg.model or not cfg.pool:
        raise CDSInputError("cds-icl score-understandability needs --model and --pool")
    pool = DemoPool.from_jsonl(cfg.pool)
    model, tok = load_model_and_tokenizer(cfg.model)
    u = understandability(model, tok, list(pool), batch_size=cfg.batch_size)
    write_jsonl(cfg.out, [{"idx": i, "nll": s} for i, s in zip(pool.ids, u, strict=True)])
    print(f"mean NLL {sum(u) / len(u):.4f} over {len(u)} demos -> {cfg.out}")
    return 0


def _cmd_lmeval(args: argparse.Namespace) -> int:
    from cds_icl.config import LMEvalTasksConfig
    from cds_icl.errors import CDSInputError
    from cds_icl.lmeval_tasks import register_lm_eval_tasks
    from cds_icl.pool import DemoPool, OrderFile
    from cds_icl.runner import load_task
    from llmcore.config import config_from_args

    cfg = config_from_args(LMEvalTasksConfig, args)
    if not cfg.pool:
        raise CDSInputError("cds-icl lm-eval-tasks needs --pool (and usually --order)")
    pool = DemoPool.from_jsonl(cfg.pool)
    order: Any = OrderFile.load(cfg.order) if cfg.order else list(range(len(pool)))
    data = load_task(cfg.task, n_pool=len(pool))
    name = register_lm_eval_tasks(
        order, pool, data.items, cfg.out, task=cfg.task, task_prefix=cfg.task_prefix, k=cfg.k,
        instruction=data.instruction, cue=data.cue, stop=data.stop, max_gen_toks=cfg.max_gen_toks,
    )  # fmt: skip
    print(f"wrote task {name} to {cfg.out}: lm_eval --include_path {cfg.out} --tasks {name}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from cds_icl.bench import run_bench

    run_bench(sizes=tuple(args.sizes), json_out=args.json_out, plot=args.plot, quick=args.quick)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from cds_icl.config import EvalConfig, LMEvalTasksConfig, OrderConfig, PoolConfig, ScoreConfig
    from llmcore.config import add_config_arguments

    p = argparse.ArgumentParser(
        prog="cds-icl", description="Many-shot CoT ICL with Curvilinear Demonstration Selection"
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    for name, cls, fn, help_ in (
        ("order", OrderConfig, _cmd_order, "order a pool with CDS / high curvature"),
        ("pool", PoolConfig, _cmd_pool, "write a reference or self-generated pool"),
        ("eval", EvalConfig, _cmd_eval, "few-shot accuracy of a selector over seeds"),
        ("score-understandability", ScoreConfig, _cmd_score, "mean NLL per demo (extension)"),
        ("lm-eval-tasks", LMEvalTasksConfig, _cmd_lmeval, "write an lm-eval task over an order"),
    ):
        sp = sub.add_parser(name, help=help_)
        add_config_arguments(sp, cls)
        sp.set_defaults(func=fn)
    b = sub.add_parser("bench", help="ordering time, prefill reuse, grading throughput, accuracy")
    b.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 256])
    b.add_argument("--json-out", default="bench.json")
    b.add_argument("--plot", default=None, help="PNG path prefix (needs the plot extra)")
    b.add_argument("--quick", action="store_true", help="smaller accuracy run")
    b.set_defaults(func=_cmd_bench)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from llmcore.cli import run_main

    return run_main("cds-icl", build_parser, argv)


if __name__ == "__main__":
    raise SystemExit(main())
