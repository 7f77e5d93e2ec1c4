"""``spec-align`` command line. ``--help`` imports neither torch nor transformers."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from llmcore.cli import run_main
from llmcore.config import add_config_arguments, config_from_args
from spec_align.config import (
    BenchConfig,
    DecodingConfig,
    EvaluateConfig,
    GenerateConfig,
    JudgeConfig,
    RunConfig,
)
from spec_align.errors import SpecAlignError, SpecConfigError
from spec_align.ttd import METHOD_NAMES as METHODS  # torch-free import


def _required(cfg: Any, *names: str) -> None:
    """Fields a command needs, from a flag or the ``--config`` file."""
    missing = [n for n in names if getattr(cfg, n) in (None, "")]
    if missing:
        flags = ", ".join("--" + n.replace("_", "-") for n in missing)
        raise SpecConfigError(f"missing {flags} (give it as a flag or in the --config file)")


def _backend(cfg: DecodingConfig, spec: str):
    from spec_align.backends import get_backend

    kw: dict[str, Any] = {}
    if spec.startswith("openai:"):
        kw["num_threads"] = cfg.num_threads
    elif spec.startswith("hf:") or spec == "tiny":
        kw["batch_size"] = cfg.batch_size
        kw["prefix_cache"] = cfg.prefix_cache
    return get_backend(spec, **kw)


def _templates(cfg: GenerateConfig):
    from spec_align.prompts import DEFAULT_TEMPLATES, TINY_TEMPLATES

    return TINY_TEMPLATES if cfg.tiny_templates else DEFAULT_TEMPLATES


def _scenario(name: str, data_dir: str | None, specs_only: bool = False, adversarial=True):
    from spec_align.data import load_scenario

    return load_scenario(name, data_dir, specs_only=specs_only, adversarial=adversarial)


def _judge(cfg: JudgeConfig, num_threads: int):
    from spec_align.judge import get_judge

    if cfg.judge == "rule":
        return get_judge("rule")
    kw: dict[str, Any] = {
        "mode": cfg.mode,
        "max_retries": cfg.max_retries,
        "cache_dir": cfg.judge_cache,
    }
    if cfg.judge.startswith("openai:"):
        kw["num_threads"] = num_threads
    return get_judge(cfg.judge, **kw)


def _method(cfg: GenerateConfig, s, judge=None):
    from spec_align.bench import _reward_for
    from spec_align.config import TTDConfig
    from spec_align.ttd import get_method

    ttd = TTDConfig.from_yaml(cfg.ttd_config) if cfg.ttd_config else TTDConfig()
    kw: dict[str, Any] = dict(ttd.as_dict().get(cfg.method, {}))
    if cfg.method in ("best_of_n", "tpo"):
        if not cfg.reward:
            raise SpecConfigError(
                f"{cfg.method} needs --reward rule|judge:SPEC (the reward used to pick responses)"
            )
        from spec_align.judge import get_judge

        reward = cfg.reward
        rj = get_judge("rule") if reward == "rule" else get_judge(reward.removeprefix("judge:"))
        if judge is not None and rj.name == judge.name:
            print(
                "warning: the reward judge equals the evaluation judge; scores are optimistic",
                file=sys.stderr,
            )
        kw["reward_fn"] = _reward_for(rj, s)
    return get_method(cfg.method, templates=_templates(cfg), **kw)


def cmd_data(a: argparse.Namespace) -> int:
    from spec_align import data

    if a.action == "list":
        base = Path(a.data_dir) if a.data_dir else data.vendored_dir()
        for name in sorted(p.name for p in base.iterdir() if (p / "specifications.json").exists()):
            s = data.load_scenario(name, base, specs_only=True)
            print(
                f"{name:10s} {len(s.safety_specs):2d} safety / {len(s.behavioral_specs):2d} "
                f"behavioral  {s.title}"
            )
    elif a.action == "show":
        s = _scenario(a.scenario, a.data_dir, specs_only=a.data_dir is None)
        print(f"{s.name}: {s.title}\n{s.description}\n\nSafety specifications:")
        print("\n".join(f"  {i + 1}. {x}" for i, x in enumerate(s.safety_specs)))
        print("Behavioral specifications:")
        print("\n".join(f"  {i + 1}. {x}" for i, x in enumerate(s.behavioral_specs)))
        if s.items:
            print(f"\n{len(s.items)} prompts ({sum(i.label == 'unsafe' for i in s.items)} unsafe)")
    elif a.action == "validate":
        print(json.dumps(data.validate_dir(a.path), indent=2))
    elif a.action == "convert":
        print("converted:", ", ".join(data.convert_hf_dir(a.from_hf, a.to)))
    elif a.action == "synth":
        from spec_align.synth import make_synthetic_scenario

        s = make_synthetic_scenario(a.seed, a.n_safe, a.n_unsafe, a.n_safety, a.n_behavioral)
        print(data.write_scenario(s, a.out))
    return 0


def _generate(cfg: GenerateConfig, out: str, judge=None) -> None:
    from spec_align.pipeline import generate

    s = _scenario(cfg.scenario, cfg.data_dir, adversarial=cfg.adversarial)
    backend = _backend(cfg, cfg.backend)
    recs = generate(
        s,
        _method(cfg, s, judge),
        backend,
        adversarial=cfg.adversarial,
        limit=cfg.limit,
        batch_size=cfg.batch_size,
        seed=cfg.seed,
        out=out,
        strict=cfg.strict,
        **cfg.gen(),
    )
    print(f"wrote {len(recs)} records to {out}")


def cmd_generate(a: argparse.Namespace) -> int:
    cfg = config_from_args(GenerateConfig, a)
    _required(cfg, "scenario", "backend", "out")
    _generate(cfg, cfg.out)
    return 0


def _evaluate(
    cfg: JudgeConfig,
    scenario: str,
    data_dir: str | None,
    generations: str,
    out_dir: str,
    num_threads: int,
    check_count: bool = True,
    judge=None,
) -> int:
    from spec_align.pipeline import evaluate

    recs = json.loads(Path(generations).read_text())
    if not isinstance(recs, list):
        raise SpecAlignError(f"{generations}: expected a JSON list of generation records")
    s = _scenario(scenario, data_dir, specs_only=data_dir is None)  # items come from the records
    _, rep = evaluate(
        recs,
        s,
        judge or _judge(cfg, num_threads),
        num_threads=num_threads,
        on_failure=cfg.on_failure,
        alpha=cfg.alpha,
        na_policy=cfg.na_policy,
        out_dir=out_dir,
        check_count=check_count,
    )
    print(rep.table())
    return 0


def cmd_evaluate(a: argparse.Namespace) -> int:
    cfg = config_from_args(EvaluateConfig, a)
    _required(cfg, "generations", "scenario")
    out_dir = cfg.out_dir or str(Path(cfg.generations).parent)
    return _evaluate(cfg, cfg.scenario, cfg.data_dir, cfg.generations, out_dir, cfg.num_threads)


def cmd_score(a: argparse.Namespace) -> int:
    from spec_align.scoring import aggregate, macro_average, rescore

    reports = {}
    for f in a.evaluations:
        recs = json.loads(Path(f).read_text())
        reports[f] = rescore(recs, a.alpha, a.na_policy) if a.recompute else aggregate(recs)
        print(f"== {f}\n{reports[f].table()}")
    if len(reports) > 1:
        print(f"== macro average over {len(reports)} files\n{macro_average(reports).table()}")
    if a.out:
        out = {k: v.to_official() for k, v in reports.items()}
        out["macro_average"] = macro_average(reports).to_official()
        Path(a.out).write_text(json.dumps(out, indent=2))
    return 0


def cmd_run(a: argparse.Namespace) -> int:
    cfg = config_from_args(RunConfig, a)
    if cfg.methods:
        return _bench(cfg)
    _required(cfg, "scenario", "backend", "out")
    judge = _judge(cfg, cfg.num_threads)
    gen = str(Path(cfg.out) / "generate.json")
    _generate(cfg, gen, judge)
    return _evaluate(
        cfg, cfg.scenario, cfg.data_dir, gen, cfg.out, cfg.num_threads, not cfg.limit, judge
    )


def cmd_bench(a: argparse.Namespace) -> int:
    return _bench(config_from_args(BenchConfig, a))


def _bench(cfg: RunConfig) -> int:
    from spec_align.bench import format_table, run_bench, write_outputs
    from spec_align.config import TTDConfig

    _required(cfg, "scenario", "backend", "out")
    methods = METHODS if cfg.methods in (None, "all") else tuple(cfg.methods.split(","))
    unknown = [m for m in methods if m not in METHODS]
    if unknown:  # before any model is loaded
        raise SpecConfigError(f"unknown methods {unknown}; valid: {', '.join(METHODS)}")
    if cfg.scenario == "synthetic":
        from spec_align.tiny import held_out_scenarios

        scenarios = held_out_scenarios()
    else:
        scenarios = [_scenario(cfg.scenario, cfg.data_dir, adversarial=cfg.adversarial)]
    if cfg.limit:
        for s in scenarios:
            s.items = s.items[: cfg.limit]
    ttd = TTDConfig.from_yaml(cfg.ttd_config) if cfg.ttd_config else TTDConfig()
    judge = _judge(cfg, cfg.num_threads)
    reward = None
    if cfg.reward and cfg.reward != "rule":
        from spec_align.judge import get_judge

        reward = get_judge(cfg.reward.removeprefix("judge:"))
    elif cfg.reward == "rule":
        from spec_align.judge import RuleJudge

        reward = RuleJudge()
    res = run_bench(
        scenarios,
        _backend(cfg, cfg.backend),
        judge,
        methods=methods,
        ttd_config=ttd.as_dict(),
        templates=_templates(cfg),
        reward_judge=reward,
        samples=cfg.samples,
        batch_size=cfg.batch_size,
        seed=cfg.seed,
        **cfg.gen(),
    )
    uses_reward = any(m in ("best_of_n", "tpo") for m in methods)
    if uses_reward and (
        res["reward_is_eval_judge"] or (reward is not None and reward.name == judge.name)
    ):
        print(
            "warning: Best-of-N/TPO use the evaluation judge as reward (optimistic)",
            file=sys.stderr,
        )
    print(format_table(res))
    for p in write_outputs(res, cfg.out, plot=cfg.plot):
        print("wrote", p)
    return 0


def cmd_serve_judge(a: argparse.Namespace) -> int:
    from spec_align.data import load_scenario
    from spec_align.server import RuleJudgeService, make_server
    from spec_align.synth import make_synthetic_scenario

    if a.judge != "rule":
        raise SpecConfigError("serve-judge serves the rule judge only (--judge rule)")
    scenarios = []
    if a.data_dir:
        base = Path(a.data_dir)
        names = (
            [a.scenario]
            if a.scenario
            else sorted(p.name for p in base.iterdir() if (p / "rules.json").exists())
        )
        scenarios = [load_scenario(n, base) for n in names]
    for seed in a.synth_seed:
        scenarios.append(make_synthetic_scenario(seed))
    if not scenarios:
        raise SpecConfigError("serve-judge needs --data-dir (synthetic scenarios) or --synth-seed")
    srv = make_server(RuleJudgeService(scenarios), a.host, a.port)
    print(f"listening on http://{a.host}:{srv.server_address[1]}/v1", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
    return 0


def cmd_tiny_model(a: argparse.Namespace) -> int:
    import shutil

    from spec_align.tiny import build_tiny_model

    e = build_tiny_model(progress=True)
    print(json.dumps({"path": str(e.path), "metrics": e.metrics}, indent=2, default=str))
    if a.out:
        shutil.copytree(e.path, a.out, dirs_exist_ok=True)
        print("copied to", a.out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="spec-align",
        description="SpecBench specification alignment and test-time deliberation (Align3).",
    )
    sub = p.add_subparsers(dest="cmd", required=True)

    d = sub.add_parser("data", help="list/show/validate/convert/synth scenario data")
    dsub = d.add_subparsers(dest="action", required=True)
    for name in ("list", "show"):
        x = dsub.add_parser(name)
        x.add_argument("--data-dir", default=None, help="official data/ folder (default: vendored)")
        if name == "show":
            x.add_argument("--scenario", required=True)
    x = dsub.add_parser("validate")
    x.add_argument("path")
    x = dsub.add_parser("convert")
    x.add_argument("--from-hf", required=True, help="folder with one parquet/json file per split")
    x.add_argument("--to", required=True)
    x = dsub.add_parser("synth")
    x.add_argument("--seed", type=int, default=0)
    x.add_argument("--n-safe", type=int, default=40)
    x.add_argument("--n-unsafe", type=int, default=40)
    x.add_argument("--n-safety", type=int, default=3)
    x.add_argument("--n-behavioral", type=int, default=3)
    x.add_argument("--out", required=True)
    d.set_defaults(func=cmd_data)

    g = sub.add_parser("generate", help="run one method on one scenario")
    add_config_arguments(g, GenerateConfig)
    g.set_defaults(func=cmd_generate)

    e = sub.add_parser("evaluate", help="judge a generate.json and score it")
    add_config_arguments(e, EvaluateConfig)
    e.set_defaults(func=cmd_evaluate)

    s = sub.add_parser("score", help="re-aggregate *_evaluate.json files (macro average)")
    s.add_argument("--evaluations", nargs="+", required=True)
    s.add_argument("--recompute", action="store_true", help="recompute item scores from verdicts")
    s.add_argument("--alpha", type=float, default=0.3)
    s.add_argument("--na-policy", choices=("official", "exclude"), default="official")
    s.add_argument("--out", default=None)
    s.set_defaults(func=cmd_score)

    r = sub.add_parser("run", help="generate + evaluate (or --methods all: the benchmark)")
    add_config_arguments(r, RunConfig)
    r.set_defaults(func=cmd_run)

    b = sub.add_parser("bench", help="every method vs vanilla in one run: table, JSON, plot")
    add_config_arguments(b, BenchConfig)
    b.set_defaults(func=cmd_bench)

    j = sub.add_parser("serve-judge", help="rule judge behind an OpenAI-compatible API (loopback)")
    j.add_argument("--judge", default="rule")
    j.add_argument("--data-dir", default=None, help="folder of synthetic scenarios (rules.json)")
    j.add_argument("--scenario", default=None)
    j.add_argument(
        "--synth-seed",
        type=int,
        action="append",
        default=[],
        help="also serve make_synthetic_scenario(seed) (repeatable)",
    )
    j.add_argument("--host", default="127.0.0.1")
    j.add_argument("--port", type=int, default=0, help="0 = any free port (printed)")
    j.set_defaults(func=cmd_serve_judge)

    t = sub.add_parser("tiny-model", help="build (or load) the CPU test model")
    t.add_argument("--out", default=None, help="also copy the checkpoint here")
    t.set_defaults(func=cmd_tiny_model)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point: a spec-align or llmcore error prints ``spec-align: error: ...`` and
    returns 2 (llmcore's CLI policy); anything else is a bug and raises."""
    return run_main("spec-align", build_parser, argv)


if __name__ == "__main__":
    sys.exit(main())
