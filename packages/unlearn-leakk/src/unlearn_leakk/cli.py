"""``unlearn-leakk`` command line: sample/generate, judge, leak, sweep, unlearn, rule, bench,
demo-tiny. ``--help`` imports neither torch nor transformers."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

K_TEXT = "1,2,4,8,16,32,64,128"
PAIRS_TEXT = "0:0,0.2:0.2,0.2:0.8,0.2:1,0.8:0.2,0.8:0.8,0.8:1,1:0.2,1:0.8,1:1"


def _ints(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints, got {text!r}") from None
    return out


def _pairs(text: str) -> list[tuple[float, float]]:
    try:
        return [(float(a), float(b)) for a, b in (p.split(":") for p in text.split(",") if p)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'T:p,T:p,...' pairs, got {text!r}") from None


def _add_model(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="HF id or local path")
    p.add_argument("--dtype", default=None, help="bf16, fp16, fp32 (default: auto)")
    p.add_argument("--device", default=None, help="cuda, cpu (default: auto)")


def _add_data(p: argparse.ArgumentParser, *, default: str | None = "tofu") -> None:
    p.add_argument(
        "--data",
        default=default,
        help="tofu, muse-knowmem, muse-verbmem, wmdp-bio, wmdp-cyber, jsonl:PATH, "
        "or world (the synthetic fictitious-author world)",
    )
    p.add_argument("--split", default="forget10", help="TOFU split (MUSE: News or Books)")
    p.add_argument("--question-key", default="paraphrased_question")
    p.add_argument("--source", default=None, help="local file/dir instead of the hub dataset")
    p.add_argument("--limit", type=int, default=None, help="first N items only")


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", default="hf", choices=["hf", "vllm"])
    p.add_argument("--no-chat-template", action="store_true", help="raw prompts (base models)")
    p.add_argument("--label", default=None, help="model label (default: model basename)")


def _add_unlearn_fields(p: argparse.ArgumentParser, *, with_config: bool) -> None:
    """UnlearnConfig flags (``--config`` only for ``unlearn``) plus the ``--greedy-stop``
    shortcut."""
    from llmcore.config import add_config_arguments, add_dataclass_arguments
    from unlearn_leakk.config import UnlearnConfig

    if with_config:
        add_config_arguments(p, UnlearnConfig)
    else:
        g = p.add_argument_group("UnlearnConfig fields", "the base unlearning method")
        add_dataclass_arguments(g, UnlearnConfig, negative_flags=True)
        g.add_argument(
            "--base-method", dest="method", default=argparse.SUPPRESS, help="same as --method"
        )
    p.add_argument(
        "--greedy-stop",
        type=float,
        default=None,
        help="stop when greedy forget accuracy <= this (checked every step; sets --early-stop)",
    )


def _add_unlearn_data(p: argparse.ArgumentParser) -> None:
    p.add_argument("--forget", required=True, help="jsonl:PATH, tofu (uses --split), or world")
    p.add_argument("--retain", default=None, help="jsonl:PATH, tofu:retain90, or world")
    p.add_argument("--split", default="forget10")
    p.add_argument("--question-key", default="question")
    p.add_argument("--no-chat-template", action="store_true")
    p.add_argument("--out", required=True)


def build_parser() -> argparse.ArgumentParser:
    """The ``unlearn-leakk`` parser. Config dataclasses (DecodingConfig, UnlearnConfig,
    RULEConfig) become flags with ``--config FILE`` applied first and typed flags over it."""
    from llmcore.config import add_config_arguments
    from unlearn_leakk.config import DecodingConfig, RULEConfig

    ap = argparse.ArgumentParser(prog="unlearn-leakk", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)

    g = sub.add_parser("sample", aliases=["generate"], help="sample n responses per forget query")
    _add_model(g)
    _add_data(g)
    _add_common(g)
    g.add_argument("--out", required=True, help="output root (official directory layout)")
    add_config_arguments(g, DecodingConfig)
    g.set_defaults(func=cmd_sample)

    j = sub.add_parser("judge", help="add judge fields to a generations file")
    j.add_argument("--in", dest="inp", required=True)
    j.add_argument("--judges", default="rouge,exact", help="rouge,exact,es,cs,llm,mcq")
    j.add_argument("--rouge-gate", type=float, default=0.1)
    j.add_argument("--nli-model", default="sileod/deberta-v3-base-tasksource-nli")
    j.add_argument("--llm-model", default="gpt-4o-mini")
    j.add_argument("--llm-base-url", default=None)
    j.add_argument("--out", default=None, help="default: <in>_evaluated.json")
    j.set_defaults(func=cmd_judge)

    lk = sub.add_parser("leak", help="leak@k curve (table + CSV) from a judged file")
    lk.add_argument("--in", dest="inp", required=True)
    lk.add_argument("--judge", default="exact", help="exact, rouge, es, cs, llm, mcq")
    lk.add_argument("--ks", type=_ints, default=_ints(K_TEXT))
    lk.add_argument("--threshold", type=float, default=None, help="binarise a continuous judge")
    lk.add_argument("--label", default="model")
    lk.add_argument("--out", default=None, help="CSV path")
    lk.set_defaults(func=cmd_leak)

    sw = sub.add_parser("sweep", help="sample + judge + leak for each (T, top-p) pair")
    _add_model(sw)
    _add_data(sw)
    _add_common(sw)
    sw.add_argument("--pairs", type=_pairs, default=_pairs(PAIRS_TEXT))
    sw.add_argument("--judges", default="exact,rouge")
    sw.add_argument("--ks", type=_ints, default=_ints(K_TEXT))
    sw.add_argument("--out", required=True)
    add_config_arguments(sw, DecodingConfig)
    sw.set_defaults(func=cmd_sweep)

    u = sub.add_parser("unlearn", help="unlearn a forget set (GradAscent/GradDiff/NPO/...)")
    _add_model(u)
    _add_unlearn_data(u)
    _add_unlearn_fields(u, with_config=True)
    u.set_defaults(func=cmd_unlearn)

    r = sub.add_parser(
        "rule",
        help="RULE (reconstructed) on top of a base method",
        description="--config takes RULEConfig fields (the base method as the mapping 'base'); "
        "the UnlearnConfig flags override the base method's fields.",
    )
    _add_model(r)
    _add_unlearn_data(r)
    r.add_argument("--init-unlearned", default=None, help="already unlearned checkpoint")
    r.add_argument("--mine-max-new-tokens", type=int, default=None, help="tokens per mined sample")
    add_config_arguments(r, RULEConfig)
    _add_unlearn_fields(r, with_config=False)
    r.set_defaults(func=cmd_rule)

    b = sub.add_parser("bench", help="throughput + leak@k curves of methods on the tiny world")
    b.add_argument("--out", default="bench-out")
    b.add_argument("--seeds", type=_ints, default=[0])
    b.add_argument("--n", type=int, default=32)
    b.add_argument("--throughput-n", type=int, default=32)
    b.add_argument("--quick", action="store_true", help="fewer methods/settings")
    b.set_defaults(func=cmd_bench)

    d = sub.add_parser("demo-tiny", help="the synthetic world end to end (one seed)")
    d.add_argument("--out", default=None, help="write the result JSON here")
    d.add_argument("--seed", type=int, default=0)
    d.set_defaults(func=cmd_demo)
    return ap


def _world_items(kind: str):
    from unlearn_leakk.world import make_world

    w = make_world(0)
    if kind == "retain":
        return w.qa_items(w.retain_authors(0), split="retain")
    return w.qa_items(w.forget_authors(0))


def _items(args: argparse.Namespace):
    from unlearn_leakk.data import load_dataset_items

    if args.data == "world":
        items = _world_items("forget")
    else:
        items = load_dataset_items(
            args.data, split=args.split, question_key=args.question_key, source=args.source
        )
    return items[: args.limit] if args.limit else items


def _decoding(args: argparse.Namespace, *, greedy_n1: bool = True):
    """DecodingConfig from ``--config`` and the typed flags; greedy (T = 0) uses n = 1."""
    import dataclasses
    import warnings

    from llmcore.config import config_from_args
    from unlearn_leakk.config import DecodingConfig

    with warnings.catch_warnings():  # T = 0 with the default n: replaced by n = 1 below
        warnings.simplefilter("ignore")
        dec = config_from_args(DecodingConfig, args)
    return dataclasses.replace(dec, n=1) if dec.is_greedy and greedy_n1 else dec


def _at(dec, t: float, p: float):
    """``dec`` at (T, top-p) ``(t, p)``; the greedy pair uses n = 1 and top-p 1."""
    import dataclasses

    return dataclasses.replace(
        dec, temperature=t, top_p=p if t > 0 else 1.0, n=1 if t == 0 else dec.n
    )


def _load(args: argparse.Namespace):
    from llmcore.models import load_model_and_tokenizer

    return load_model_and_tokenizer(args.model, dtype=args.dtype, device=args.device)


def _label(args: argparse.Namespace) -> str:
    return args.label or Path(str(args.model).rstrip("/")).name


def cmd_sample(args: argparse.Namespace) -> int:
    from unlearn_leakk.evaluate import generate_file, generations_path

    items = _items(args)
    dec = _decoding(args)
    if args.backend == "hf":
        model, tok = _load(args)
    else:
        model, tok = str(args.model), None
    path = generations_path(args.out, _label(args), dec)
    generate_file(
        model,
        tok,
        items,
        dec,
        path,
        backend=args.backend,
        chat_template=not args.no_chat_template,
        progress=True,
    )
    print(path)
    return 0


def cmd_judge(args: argparse.Namespace) -> int:
    from llmcore.data import write_jsonl
    from unlearn_leakk.evaluate import judge_rows, read_generations
    from unlearn_leakk.judges import get_judge

    rows = read_generations(args.inp)
    names = [x for x in args.judges.split(",") if x]
    judges = {}
    for n in names:
        kw = {"rouge_gate": args.rouge_gate}
        if n == "es":
            kw["model"] = args.nli_model
        if n == "llm":
            kw |= {"model": args.llm_model, "base_url": args.llm_base_url}
        judges[n] = get_judge(n, **kw)
    rows = judge_rows(rows, judges)
    inp = Path(args.inp)
    out = Path(args.out) if args.out else inp.with_name(inp.stem + "_evaluated.json")
    write_jsonl(out, rows)
    print(out)
    return 0


def _print_table(df) -> None:
    with __import__("pandas").option_context("display.width", 200, "display.max_columns", 50):
        print(df.to_string(index=False, float_format=lambda v: f"{v:.3f}"))


def cmd_leak(args: argparse.Namespace) -> int:
    from unlearn_leakk.config import DecodingConfig
    from unlearn_leakk.evaluate import JUDGE_FIELDS, LeakReport, leak_curve_from_rows
    from unlearn_leakk.evaluate import read_generations as rg

    rows = rg(args.inp)
    fld = JUDGE_FIELDS.get(args.judge, args.judge)
    thr = args.threshold
    curve, counts = leak_curve_from_rows(
        rows, fld, args.ks, binary=True if thr else None, threshold=thr if thr is not None else 0.5
    )
    d = rows[0].get("decoding") or {}
    dec = DecodingConfig(
        float(d.get("temperature", 1.0)),
        float(d.get("top_p", 1.0) or 1.0),
        n=len(rows[0]["responses"]),
    )
    rep = LeakReport()
    rep.add(args.label, fld, dec, curve, counts)
    _print_table(rep.table())
    if args.out:
        rep.to_csv(args.out)
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from unlearn_leakk.evaluate import evaluate_leak

    items = _items(args)
    base = _decoding(args, greedy_n1=False)  # n of the sampled pairs
    decs = [_at(base, t, p) for t, p in args.pairs]
    ks = args.ks
    backend: object = args.backend
    if args.backend == "hf":
        model, tok = _load(args)
    else:  # one vLLM engine for every (T, top-p) pair
        from llmcore.generation import get_backend
        from llmcore.models import load_tokenizer

        model, tok = str(args.model), load_tokenizer(args.model)
        backend = get_backend("vllm", model)
    report = None
    frames = []
    for d in decs:
        kk = [k for k in ks if k <= d.n]
        report = evaluate_leak(
            model,
            items,
            d,
            [x for x in args.judges.split(",") if x],
            kk,
            out_dir=args.out,
            label=_label(args),
            tokenizer=tok,
            backend=backend,
            chat_template=not args.no_chat_template,
            progress=True,
        )
        frames.append(report.table())
    import pandas as pd

    df = pd.concat(frames, ignore_index=True)
    _print_table(df)
    out = Path(args.out) / _label(args) / "sweep.csv"
    df.to_csv(out, index=False)
    print(out)
    return 0


def _with_greedy_stop(cfg, args: argparse.Namespace):
    import dataclasses

    from unlearn_leakk.config import GreedyForgetStop

    if args.greedy_stop is None:
        return cfg
    return dataclasses.replace(cfg, early_stop=GreedyForgetStop(args.greedy_stop))


def _unlearn_cfg(args: argparse.Namespace):
    from llmcore.config import config_from_args
    from unlearn_leakk.config import UnlearnConfig

    return _with_greedy_stop(config_from_args(UnlearnConfig, args), args)


def _rule_cfg(args: argparse.Namespace):
    """RULEConfig from ``--config``/flags; typed UnlearnConfig flags override its ``base``."""
    import dataclasses

    from llmcore.config import (
        config_from_args,
        config_from_dict,
        config_to_dict,
        load_config_file,
    )
    from unlearn_leakk.config import RULEConfig, UnlearnConfig

    cfg = config_from_args(RULEConfig, args)
    typed = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(UnlearnConfig)
        if hasattr(args, f.name)
    }
    if typed:
        merged = config_to_dict(cfg.base) | typed
        if "method" in typed and "beta" not in typed:
            # beta=None resolves per method (NPO 0.5, SimNPO 4.5) unless the file set it
            file_base = load_config_file(args.config).get("base", {}) if args.config else {}
            merged["beta"] = file_base.get("beta") if isinstance(file_base, dict) else None
        cfg = dataclasses.replace(
            cfg, base=config_from_dict(UnlearnConfig, merged, source="command-line flags")
        )
    cfg = dataclasses.replace(cfg, base=_with_greedy_stop(cfg.base, args))
    if args.mine_max_new_tokens is not None:
        assert cfg.mine_decoding is not None
        dec = dataclasses.replace(cfg.mine_decoding, max_new_tokens=args.mine_max_new_tokens)
        cfg = dataclasses.replace(cfg, mine_decoding=dec)
    return cfg


def _forget_retain(args: argparse.Namespace):
    from unlearn_leakk.data import load_dataset_items

    def load(spec: str | None, kind: str):
        if spec is None:
            return None
        if spec == "world":
            return _world_items(kind)
        if spec.startswith("tofu"):
            split = spec.split(":", 1)[1] if ":" in spec else args.split
            return load_dataset_items("tofu", split=split, question_key=args.question_key)
        return load_dataset_items(spec, split=args.split, question_key=args.question_key)

    return load(args.forget, "forget"), load(args.retain, "retain")


def cmd_unlearn(args: argparse.Namespace) -> int:
    from unlearn_leakk.trainers import UnlearnResult, unlearn

    cfg = _unlearn_cfg(args)
    forget, retain = _forget_retain(args)
    model, tok = _load(args)
    res = UnlearnResult()
    unlearn(
        model,
        tok,
        forget,
        retain,
        cfg,
        chat_template=not args.no_chat_template,
        result=res,
        progress=True,
    )
    model.save_pretrained(args.out)
    tok.save_pretrained(args.out)
    print(json.dumps({"out": args.out, "steps": res.steps, "stopped_early": res.stopped_early}))
    return 0


def cmd_rule(args: argparse.Namespace) -> int:
    from unlearn_leakk.rule import rule_unlearn

    cfg = _rule_cfg(args)
    forget, retain = _forget_retain(args)
    model, tok = _load(args)
    init = None
    if args.init_unlearned:
        from llmcore.models import load_causal_lm

        init = load_causal_lm(args.init_unlearned, dtype=args.dtype, device=args.device)
    model, hist = rule_unlearn(
        model,
        tok,
        forget,
        retain,
        cfg,
        init_unlearned=init,
        chat_template=not args.no_chat_template,
    )
    model.save_pretrained(args.out)
    tok.save_pretrained(args.out)
    from llmcore.data import atomic_write_json

    atomic_write_json(Path(args.out) / "rule_history.json", hist.to_dict())
    print(json.dumps(hist.to_dict()["rounds"], default=str))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from unlearn_leakk.bench import run_bench

    run_bench(
        args.out, seeds=args.seeds, n=args.n, throughput_n=args.throughput_n, quick=args.quick
    )
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from unlearn_leakk.demo import run

    res = run(seed=args.seed)
    print(json.dumps(res, indent=1, default=str))
    if args.out:
        from llmcore.data import atomic_write_json

        atomic_write_json(Path(args.out) / "demo.json", res)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: llmcore's CLI error policy (an llmcore/unlearn-leakk error prints
    ``unlearn-leakk: error: ...`` and returns 2; anything else is a bug and raises)."""
    from llmcore.cli import run_main

    return run_main("unlearn-leakk", build_parser, argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
