"""``pfa-learnability`` command line: gen-pfa, count-dist, sample, train, eval-kl, experiment,
report, bench.

``pfa-learnability --help`` imports neither torch nor transformers.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _out(obj: Any, path: Path | None) -> None:
    text = json.dumps(obj, indent=1, default=str)
    if path is not None:
        from llmcore.data import atomic_write_text

        atomic_write_text(path, text + "\n")
    print(text)


def build_parser() -> argparse.ArgumentParser:
    from llmcore.config import add_config_arguments

    from .config import EvalConfig, ExperimentConfig, GenConfig, SampleConfig, TrainConfig

    ap = argparse.ArgumentParser(
        prog="pfa-learnability",
        description="Causal learnability analysis on probabilistic finite automata",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)

    g = sub.add_parser("gen-pfa", help="write a random PFA as JSON")
    add_config_arguments(g, GenConfig)
    g.add_argument("-o", "--output", type=Path, required=True, help="PFA JSON to write")
    g.set_defaults(func=_cmd_gen)

    c = sub.add_parser("count-dist", help="print the exact count distribution Z of a property")
    c.add_argument("pfa", type=Path, help="PFA JSON")
    c.add_argument("--prop", required=True, help="arc:<q>:<sym>:<q2>, sym:<sym> or enter:<q>")
    c.add_argument("--bins", type=int, default=16, help="number of exact bins B (default 16)")
    c.set_defaults(func=_cmd_count)

    s = sub.add_parser("sample", help="sample a corpus under an intervention")
    s.add_argument("pfa", type=Path, help="PFA JSON")
    add_config_arguments(s, SampleConfig)
    s.add_argument("-o", "--output", type=Path, required=True, help="corpus text file")
    s.set_defaults(func=_cmd_sample)

    t = sub.add_parser("train", help="train a language model on a corpus")
    t.add_argument("corpus", type=Path, help="corpus text file (one string per line)")
    add_config_arguments(t, TrainConfig)
    t.add_argument(
        "--pfa", type=Path, default=None, help="PFA JSON (its alphabet = the vocabulary)"
    )
    t.add_argument("-o", "--output", type=Path, required=True, help="model directory")
    t.set_defaults(func=_cmd_train)

    e = sub.add_parser("eval-kl", help="decomposed KL of a model (hub id or path) to a PFA")
    e.add_argument("pfa", type=Path, help="PFA JSON (the natural automaton)")
    e.add_argument("model", help="model directory or hub id")
    add_config_arguments(e, EvalConfig)
    e.add_argument("--corpus", type=Path, default=None, help="corpus (for reference=training)")
    e.add_argument("-o", "--output", type=Path, default=None, help="KL report JSON")
    e.set_defaults(func=_cmd_eval)

    x = sub.add_parser("experiment", help="correlational or interventional experiment")
    x.add_argument("kind", choices=["correlational", "interventional"])
    add_config_arguments(x, ExperimentConfig)
    x.add_argument("-o", "--output", type=Path, required=True, help="results JSONL (resumable)")
    x.set_defaults(func=_cmd_experiment)

    r = sub.add_parser("report", help="slopes and CIs from results JSONL")
    r.add_argument("results", type=Path, nargs="+", help="results JSONL file(s)")
    r.add_argument("--json-out", type=Path, default=None)
    r.set_defaults(func=_cmd_report)

    b = sub.add_parser("bench", help="sampler, count distribution and KL timings")
    b.add_argument("--quick", action="store_true", help="fewer strings (a smoke run)")
    b.add_argument("--json-out", type=Path, default=None)
    b.add_argument("--plot", type=Path, default=None, help="PNG (needs the plot extra)")
    b.set_defaults(func=_cmd_bench)
    return ap


def _load_pfa(path: Path) -> Any:
    from .errors import PFAValidationError
    from .pfa import PFA

    if not path.exists():
        raise PFAValidationError(f"PFA file {path} does not exist (make one with gen-pfa)")
    return PFA.from_json(path)


def _cmd_gen(args: argparse.Namespace) -> int:
    from llmcore.config import config_from_args

    from .config import GenConfig
    from .pfa import PFA

    c = config_from_args(GenConfig, args)
    p = PFA.random(
        n_states=c.states, alphabet_size=c.alphabet, out_degree=c.out_degree, alpha=c.alpha,
        target_mean_length=c.mean_length, deterministic=c.deterministic, seed=c.seed,
    )  # fmt: skip
    p.to_json(args.output)
    print(f"wrote {args.output}: {p} (mean length {p.mean_length():.2f})")
    return 0


def _cmd_count(args: argparse.Namespace) -> int:
    from .semiring import count_distribution

    Z = count_distribution(_load_pfa(args.pfa), args.prop, args.bins)
    for k, z in enumerate(Z):
        label = f">={k}" if k == len(Z) - 1 else str(k)
        print(f"{label:>5}  {z:.6g}")
    return 0


def _cmd_sample(args: argparse.Namespace) -> int:
    from llmcore.config import config_from_args

    from .config import SampleConfig
    from .sampling import sample_corpus

    c = config_from_args(SampleConfig, args)
    corpus = sample_corpus(
        _load_pfa(args.pfa), c.prop, mode=c.mode, f=c.factor, n=c.n, B=c.bins, seed=c.seed,
        max_length=c.max_length, tilt_method=c.tilt_method,
    )  # fmt: skip
    corpus.save(args.output)
    print(json.dumps(corpus.meta["realised_freq"]))
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from llmcore.config import config_from_args

    from .config import TrainConfig
    from .neural import save_lm, train_lm
    from .sampling import read_corpus

    c = config_from_args(TrainConfig, args)
    strings, _ = read_corpus(args.corpus)
    alphabet = _load_pfa(args.pfa).alphabet if args.pfa else None
    model, tok = train_lm(
        strings, arch=c.arch, d_model=c.d_model, n_layers=c.n_layers, n_heads=c.n_heads,
        steps=c.steps, lr=c.lr, batch_size=c.batch_size, seed=c.seed, alphabet=alphabet,
    )  # fmt: skip
    save_lm(model, tok, args.output)
    print(json.dumps(model.train_metrics))
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    from llmcore.config import config_from_args

    from .config import EvalConfig
    from .errors import PFAValidationError
    from .kl import decomposed_kl
    from .neural import LMNextSymbolModel, load_lm
    from .sampling import read_corpus, sample_corpus

    c = config_from_args(EvalConfig, args)
    pfa = _load_pfa(args.pfa)
    ref = pfa
    if c.reference == "training":
        if args.corpus is None:
            raise PFAValidationError("reference=training needs --corpus (its sidecar meta)")
        _, meta = read_corpus(args.corpus)
        mode = meta.get("mode", "tilt")
        if mode == "exact":
            mode = f"exact:{meta['bin']}"
        elif mode == "mixture":
            mode = "mixture:" + json.dumps(meta["bins"])
        ref = sample_corpus(
            pfa, meta["prop"], mode=mode, f=meta.get("factor") or 1.0, n=1, B=meta.get("B", 16)
        ).sampler
    model, tok = load_lm(args.model, device=c.device)
    lm = LMNextSymbolModel(model, tok, pfa.alphabet, batch_size=c.batch_size)
    rep = decomposed_kl(ref, lm, c.prop, n_eval=c.n_eval, seed=c.seed, unit=c.unit, base=pfa)
    _out(rep.to_dict(), args.output)
    return 0


def _cmd_experiment(args: argparse.Namespace) -> int:
    from llmcore.config import config_from_args
    from llmcore.data import ResultsWriter

    from .config import ExperimentConfig
    from .experiment import run_experiment

    c = config_from_args(ExperimentConfig, args)
    with ResultsWriter(args.output, id_key="id") as w:
        rows = run_experiment(c, args.kind, writer=w)
    print(f"{len(rows)} new rows -> {args.output}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from .experiment import report

    res = report(args.results)
    _out(res, args.json_out)
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from .bench import run_bench

    run_bench(quick=args.quick, json_out=args.json_out, plot=args.plot)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from llmcore.cli import run_main

    return run_main("pfa-learnability", build_parser, argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
