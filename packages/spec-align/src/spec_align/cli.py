"""``spec-align`` command line (spec §5.3). ``--help`` imports neither torch nor transformers."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from spec_align.errors import SpecAlignError
from spec_align.ttd import METHOD_NAMES as METHODS  # torch-free import


def _gen_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("decoding")
    g.add_argument("--max-new-tokens", type=int, default=256, help="tokens per model call")
    g.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--top-k", type=int, default=0, help="0 disables top-k")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--batch-size", type=int, default=16, help="prompts per batched stage (HF)")
    g.add_argument("--num-threads", type=int, default=8, help="concurrent HTTP requests")
    g.add_argument(
        "--no-prefix-cache",
        action="store_true",
        help="HF: re-prefill every stage instead of reusing the cached KV prefix",
    )


def _gen(a: argparse.Namespace) -> dict[str, Any]:
    return {
        "max_new_tokens": a.max_new_tokens,
        "temperature": a.temperature,
        "top_p": a.top_p,
        "top_k": a.top_k,
    }


def _backend(spec: str, a: argparse.Namespace):
    from spec_align.backends import get_backend

    kw: dict[str, Any] = {}
    if spec.startswith("openai:"):
        kw["num_threads"] = a.num_threads
    elif spec.startswith("hf:") or spec == "tiny":
        kw["batch_size"] = a.batch_size
        kw["prefix_cache"] = not getattr(a, "no_prefix_cache", False)
    return get_backend(spec, **kw)


def _templates(a: argparse.Namespace):
    from spec_align.prompts import DEFAULT_TEMPLATES, TINY_TEMPLATES

    return TINY_TEMPLATES if getattr(a, "tiny_templates", False) else DEFAULT_TEMPLATES


def _scenario(a: argparse.Namespace, specs_only: bool = False):
    from spec_align.data import load_scenario

    return load_scenario(
        a.scenario,
        a.data_dir,
        specs_only=specs_only,
        adversarial=not getattr(a, "no_adversarial", False),
    )


def _judge(a: argparse.Namespace):
    from spec_align.judge import get_judge

    if a.judge == "rule":
        return get_judge("rule")
    kw: dict[str, Any] = {"mode": a.mode, "max_retries": a.max_retries, "cache_dir": a.judge_cache}
    if a.judge.startswith("openai:"):
        kw["num_threads"] = a.num_threads
    return get_judge(a.judge, **kw)


def _judge_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--judge", default="rule", help="rule | hf:ID | openai:MODEL@URL | vllm:ID")
    p.add_argument("--mode", choices=("joint", "sequential"), default="joint")
    p.add_argument("--alpha", type=float, default=0.3)
    p.add_argument(
        "--na-policy",
        choices=("official", "exclude"),
        default="official",
        help="'exclude' is NOT the official score",
    )
    p.add_argument("--max-retries", type=int, default=5)
    p.add_argument("--on-failure", choices=("raise", "record"), default="record")
    p.add_argument("--judge-cache", default=None, help="folder caching judge replies")


def _method(a: argparse.Namespace, s, judge=None):
    from spec_align.bench import _reward_for
    from spec_align.config import TTDConfig
    from spec_align.ttd import get_method

    cfg = TTDConfig.from_yaml(a.ttd_config) if a.ttd_config else TTDConfig()
    kw: dict[str, Any] = dict(cfg.as_dict().get(a.method, {}))
    if a.method in ("best_of_n", "tpo"):
        if not a.reward:
            raise SpecAlignError(
                f"{a.method} needs --reward rule|judge:SPEC (the reward used to pick responses)"
            )
        from spec_align.judge import get_judge

        rj = get_judge("rule") if a.reward == "rule" else get_judge(a.reward.removeprefix("judge:"))
        if judge is not None and rj.name == judge.name:
            print(
                "warning: the reward judge equals the evaluation judge; scores are optimistic",
                file=sys.stderr,
            )
        kw["reward_fn"] = _reward_for(rj, s)
    return get_method(a.method, templates=_templates(a), **kw)


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
        s = _scenario(a, specs_only=a.data_dir is None)
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


def cmd_generate(a: argparse.Namespace) -> int:
    from spec_align.pipeline import generate

    s = _scenario(a)
    backend = _backend(a.backend, a)
    recs = generate(
        s,
        _method(a, s),
        backend,
        adversarial=not a.no_adversarial,
        limit=a.limit,
        batch_size=a.batch_size,
        seed=a.seed,
        out=a.out,
        strict=a.strict,
        **_gen(a),
    )
    print(f"wrote {len(recs)} records to {a.out}")
    return 0


def _evaluate(a: argparse.Namespace, generations: str, out_dir: str) -> int:
    from spec_align.pipeline import evaluate

    recs = json.loads(Path(generations).read_text())
    if not isinstance(recs, list):
        raise SpecAlignError(f"{generations}: expected a JSON list of generation records")
    s = _scenario(a, specs_only=a.data_dir is None)  # items come from the records
    _, rep = evaluate(
        recs,
        s,
        _judge(a),
        num_threads=a.num_threads,
        on_failure=a.on_failure,
        alpha=a.alpha,
        na_policy=a.na_policy,
        out_dir=out_dir,
        check_count=not a.limit if hasattr(a, "limit") else True,
    )
    print(rep.table())
    return 0


def cmd_evaluate(a: argparse.Namespace) -> int:
    a.limit = None
    return _evaluate(a, a.generations, a.out_dir or str(Path(a.generations).parent))


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
    if a.methods:
        return cmd_bench(a)
    out = Path(a.out)
    a.out = str(out / "generate.json")
    cmd_generate(a)
    return _evaluate(a, a.out, str(out))


def cmd_bench(a: argparse.Namespace) -> int:
    from spec_align.bench import format_table, run_bench, write_outputs
    from spec_align.config import TTDConfig

    methods = METHODS if a.methods in (None, "all") else tuple(a.methods.split(","))
    if a.scenario == "synthetic":
        from spec_align.tiny import held_out_scenarios

        scenarios = held_out_scenarios()
    else:
        scenarios = [_scenario(a)]
    if a.limit:
        for s in scenarios:
            s.items = s.items[: a.limit]
    cfg = TTDConfig.from_yaml(a.ttd_config) if a.ttd_config else TTDConfig()
    judge = _judge(a)
    reward = None
    if a.reward and a.reward != "rule":
        from spec_align.judge import get_judge

        reward = get_judge(a.reward.removeprefix("judge:"))
    elif a.reward == "rule":
        from spec_align.judge import RuleJudge

        reward = RuleJudge()
    res = run_bench(
        scenarios,
        _backend(a.backend, a),
        judge,
        methods=methods,
        ttd_config=cfg.as_dict(),
        templates=_templates(a),
        reward_judge=reward,
        samples=a.samples,
        batch_size=a.batch_size,
        seed=a.seed,
        **_gen(a),
    )
    if res["reward_is_eval_judge"] or (reward is not None and reward.name == judge.name):
        print(
            "warning: Best-of-N/TPO use the evaluation judge as reward (optimistic)",
            file=sys.stderr,
        )
    print(format_table(res))
    for p in write_outputs(res, a.out, plot=not a.no_plot):
        print("wrote", p)
    return 0


def cmd_serve_judge(a: argparse.Namespace) -> int:
    from spec_align.data import load_scenario
    from spec_align.server import RuleJudgeService, make_server
    from spec_align.synth import make_synthetic_scenario

    if a.judge != "rule":
        raise SpecAlignError("serve-judge serves the rule judge only (--judge rule)")
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
        raise SpecAlignError("serve-judge needs --data-dir (synthetic scenarios) or --synth-seed")
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
    d.set_defaults(fn=cmd_data)

    def gen_common(x: argparse.ArgumentParser, out_help: str) -> None:
        x.add_argument("--scenario", required=True)
        x.add_argument("--data-dir", default=None)
        x.add_argument("--backend", required=True, help="hf:ID | openai:MODEL@URL | vllm:ID | tiny")
        x.add_argument("--method", choices=METHODS, default="vanilla")
        x.add_argument("--ttd-config", default=None, help="YAML with official TTD keys")
        x.add_argument("--reward", default=None, help="best_of_n/tpo reward: rule | judge:SPEC")
        x.add_argument("--no-adversarial", action="store_true", help="generate from 'prompt'")
        x.add_argument("--limit", type=int, default=None)
        x.add_argument("--strict", action="store_true", help="error on an empty response")
        x.add_argument(
            "--tiny-templates",
            action="store_true",
            help="short prompt texts of the tiny test model",
        )
        x.add_argument("--out", required=True, help=out_help)
        _gen_args(x)

    g = sub.add_parser("generate", help="run one method on one scenario")
    gen_common(g, "generate.json path")
    g.set_defaults(fn=cmd_generate)

    e = sub.add_parser("evaluate", help="judge a generate.json and score it")
    e.add_argument("--generations", required=True)
    e.add_argument("--scenario", required=True)
    e.add_argument("--data-dir", default=None)
    e.add_argument("--out-dir", default=None, help="default: the folder of --generations")
    e.add_argument("--num-threads", type=int, default=8)
    _judge_args(e)
    e.set_defaults(fn=cmd_evaluate)

    s = sub.add_parser("score", help="re-aggregate *_evaluate.json files (macro average)")
    s.add_argument("--evaluations", nargs="+", required=True)
    s.add_argument("--recompute", action="store_true", help="recompute item scores from verdicts")
    s.add_argument("--alpha", type=float, default=0.3)
    s.add_argument("--na-policy", choices=("official", "exclude"), default="official")
    s.add_argument("--out", default=None)
    s.set_defaults(fn=cmd_score)

    r = sub.add_parser("run", help="generate + evaluate (or --methods all: the benchmark)")
    gen_common(r, "result folder")
    r.add_argument("--methods", default=None, help="comma list or 'all': run the benchmark")
    r.add_argument("--samples", type=int, default=1)
    r.add_argument("--no-plot", action="store_true")
    _judge_args(r)
    r.set_defaults(fn=cmd_run)

    b = sub.add_parser("bench", help="every method vs vanilla in one run: table, JSON, plot")
    b.add_argument(
        "--scenario",
        default="synthetic",
        help="'synthetic' (the two held-out tiny-model scenarios) or a scenario name",
    )
    b.add_argument("--data-dir", default=None)
    b.add_argument("--backend", default="tiny")
    b.add_argument("--methods", default="all")
    b.add_argument("--ttd-config", default=None)
    b.add_argument("--reward", default="rule", help="best_of_n/tpo reward: rule | judge:SPEC")
    b.add_argument("--samples", type=int, default=1)
    b.add_argument("--limit", type=int, default=None)
    b.add_argument("--tiny-templates", action="store_true", default=None)
    b.add_argument("--no-plot", action="store_true")
    b.add_argument("--out", default="spec_align_bench")
    _gen_args(b)
    _judge_args(b)
    b.set_defaults(fn=cmd_bench)

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
    j.set_defaults(fn=cmd_serve_judge)

    t = sub.add_parser("tiny-model", help="build (or load) the CPU test model")
    t.add_argument("--out", default=None, help="also copy the checkpoint here")
    t.set_defaults(fn=cmd_tiny_model)
    return p


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    if getattr(a, "tiny_templates", False) is None:
        a.tiny_templates = a.backend == "tiny"
    try:
        return int(a.fn(a) or 0)
    except (SpecAlignError, ValueError) as exc:
        print(f"spec-align: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        from llmcore.errors import LLMCoreError

        if isinstance(exc, LLMCoreError):
            print(f"spec-align: error: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
