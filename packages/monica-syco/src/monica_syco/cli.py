"""``monica-syco`` command line: synth, tiny-model, convert, collect, fit, generate, eval,
score-trajectories, bench. ``--help`` imports neither torch nor transformers."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _cfg(p: argparse.ArgumentParser, cls_name: str) -> None:
    import monica_syco.config as c
    from llmcore.config import add_config_arguments

    add_config_arguments(p, getattr(c, cls_name))


def _model_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="hub id or local path of a causal LM")
    p.add_argument("--device", default="cpu", help="cpu | cuda | auto (default: cpu)")
    p.add_argument("--dtype", default=None, help="fp32 | bf16 | fp16 (default: auto)")
    p.add_argument("--layers-path", default=None, help="dotted path of the decoder-block list")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="monica-syco",
        description="MONICA: step-level sycophancy monitoring and calibration during reasoning",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("synth", help="write the colour world: corpus + train/dev/test items")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--n-entities", type=int, default=48)
    s.add_argument("--out", type=Path, required=True)
    s.set_defaults(func=cmd_synth)

    t = sub.add_parser("tiny-model", help="build the world's tiny reasoning model (zoo cache)")
    from llmcore.config import add_config_arguments
    from monica_syco.world import TinyModelConfig

    add_config_arguments(t, TinyModelConfig)
    t.add_argument("--out", type=Path, default=None, help="also save_pretrained it here")
    t.set_defaults(func=cmd_tiny_model)

    c = sub.add_parser("convert", help="SycophancyEval / Anthropic sycophancy JSONL to items")
    c.add_argument(
        "--from",
        dest="kind",
        required=True,
        choices=["sycophancy-eval-answer", "sycophancy-eval-are-you-sure", "anthropic"],
    )
    c.add_argument("file", type=Path)
    c.add_argument("--out", type=Path, required=True)
    c.set_defaults(func=cmd_convert)

    co = sub.add_parser("collect", help="trajectories -> labelled pooled step states")
    _model_flags(co)
    co.add_argument("--items", type=Path, required=True)
    co.add_argument("--out", type=Path, required=True)
    _cfg(co, "CollectConfig")
    co.set_defaults(func=cmd_collect)

    f = sub.add_parser("fit", help="fit the monitor probes and calibration vectors")
    f.add_argument("--steps", type=Path, required=True, help="step dataset folder")
    f.add_argument("--out", type=Path, required=True)
    f.add_argument("--model", default=None, help="model for alpha_max/threshold on dev items")
    f.add_argument("--dev-items", type=Path, default=None)
    f.add_argument("--device", default="cpu")
    _cfg(f, "FitConfig")
    f.set_defaults(func=cmd_fit)

    for name, helptext in (("generate", "generate with MONICA"), ("eval", "compare methods")):
        g = sub.add_parser(name, help=helptext)
        _model_flags(g)
        g.add_argument("--monitor", type=Path, required=True, help="folder with monitor.json")
        g.add_argument("--calibrator", type=Path, default=None, help="folder with calibrator.json")
        if name == "generate":
            src = g.add_mutually_exclusive_group(required=True)
            src.add_argument("--prompt", default=None)
            src.add_argument("--items", type=Path, default=None)
            g.add_argument("--out", type=Path, default=None, help="trajectory JSONL (resumes)")
            g.set_defaults(func=cmd_generate)
        else:
            g.add_argument("--items", type=Path, required=True)
            g.add_argument("--methods", default="none,always,answer_level,monica")
            g.add_argument("--out", type=Path, required=True, help="report JSON")
            g.add_argument("--traj-out", type=Path, default=None, help="trajectory JSONL (resumes)")
            g.set_defaults(func=cmd_eval)
        _cfg(g, "MonitorSettings")
        _gen_flags(g)

    sc = sub.add_parser("score-trajectories", help="offline SDS, one forward pass per trajectory")
    _model_flags(sc)
    sc.add_argument("--monitor", type=Path, required=True)
    sc.add_argument("--traj", type=Path, required=True, help="JSONL with prompt + text")
    sc.add_argument("--out", type=Path, default=None)
    sc.set_defaults(func=cmd_score)

    b = sub.add_parser("bench", help="overhead vs plain generate on the tiny model")
    _cfg(b, "BenchConfig")
    b.add_argument("--json-out", type=Path, default=None)
    b.add_argument("--plot", type=Path, default=None, help="PNG (needs the plot extra)")
    b.set_defaults(func=cmd_bench)
    return ap


def _gen_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--do-sample", action="store_true")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)


def _load(args: argparse.Namespace) -> tuple[Any, Any]:
    from llmcore import load_model_and_tokenizer

    return load_model_and_tokenizer(args.model, device=args.device, dtype=args.dtype)


def _segmenter(tok: Any, s: Any) -> Any:
    from monica_syco.segment import StepSegmenter

    return StepSegmenter(
        tok,
        delimiter=s.delimiter,
        max_step_tokens=s.max_step_tokens,
        think_open=s.think_open or None,
        think_close=s.think_close or None,
    )


def cmd_synth(args: argparse.Namespace) -> int:
    from llmcore.data import write_jsonl
    from monica_syco.items import save_items
    from monica_syco.world import make_synthetic_world

    w = make_synthetic_world(args.seed, args.n_entities)
    args.out.mkdir(parents=True, exist_ok=True)
    write_jsonl(args.out / "corpus.jsonl", w.train_corpus())
    for split in ("train", "dev", "test"):
        save_items(w.items(split), args.out / f"items_{split}.jsonl")
    print(json.dumps({"out": str(args.out), "entities": len(w.entities)}))
    return 0


def cmd_tiny_model(args: argparse.Namespace) -> int:
    from llmcore.config import config_from_args
    from monica_syco.world import TinyModelConfig, build_tiny_model

    cfg = config_from_args(TinyModelConfig, args)
    entry = build_tiny_model(cfg, progress=True)
    if args.out:
        model, tok = entry.load()
        model.save_pretrained(args.out)
        tok.save_pretrained(args.out)
    print(json.dumps({"path": str(entry.path), "metrics": entry.metrics}, default=str))
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    from monica_syco.items import convert_anthropic_sycophancy, convert_sycophancy_eval, save_items

    if args.kind == "anthropic":
        items = convert_anthropic_sycophancy(args.file)
    else:
        items = convert_sycophancy_eval(
            args.file, "answer" if args.kind.endswith("answer") else "are_you_sure"
        )
    save_items(items, args.out)
    print(json.dumps({"items": len(items), "out": str(args.out)}))
    return 0


def _labeler(spec: str) -> Any:
    if spec == "rule":
        return "rule"
    if not spec.startswith("llm:") or "@" not in spec:
        from monica_syco.errors import MonicaConfigError

        raise MonicaConfigError(f"--labeler must be 'rule' or 'llm:MODEL@URL', got {spec!r}")
    from llmcore.generation import get_backend
    from monica_syco.monitor import LLMStepScorer

    model, url = spec[4:].split("@", 1)
    return LLMStepScorer(get_backend("openai", model, base_url=url, chat=True))


def cmd_collect(args: argparse.Namespace) -> int:
    from llmcore.config import config_from_args
    from llmcore.runtime import set_seed
    from monica_syco.collect import collect_steps
    from monica_syco.config import CollectConfig
    from monica_syco.generate import block_names
    from monica_syco.items import load_items
    from monica_syco.monitor import default_layers

    cfg = config_from_args(CollectConfig, args)
    set_seed(cfg.seed)
    model, tok = _load(args)
    L = len(block_names(model, args.layers_path))
    if cfg.layers == "auto":
        layers = list(range(L))
    elif cfg.layers == "default":
        layers = default_layers(L)
    else:
        layers = [int(x) for x in cfg.layers.split(",")]
    ds = collect_steps(
        model,
        tok,
        load_items(args.items),
        layers,
        labeler=_labeler(cfg.labeler),
        n_samples=cfg.n_samples,
        temperature=cfg.temperature,
        max_new_tokens=cfg.max_new_tokens,
        batch_size=cfg.batch_size,
        seed=cfg.seed,
        require_clean_correct=cfg.require_clean_correct,
        progress=True,
    )
    ds.save(args.out)
    print(json.dumps({"steps": len(ds), "layers": ds.layers, **ds.info}))
    return 0


def cmd_fit(args: argparse.Namespace) -> int:
    from llmcore.config import config_from_args
    from monica_syco.collect import StepDataset, fit_calibrator, fit_monitor
    from monica_syco.config import FitConfig

    cfg = config_from_args(FitConfig, args)
    ds = StepDataset.load(args.steps)
    layers: Any = "auto" if cfg.layers == "auto" else [int(x) for x in cfg.layers.split(",")]
    mon = fit_monitor(
        ds,
        layers,
        probe=cfg.probe,
        window=cfg.window,
        aggregate=cfg.aggregate,
        C=cfg.C,
        seed=cfg.seed,
    )
    cal = fit_calibrator(
        ds,
        mon.layers,
        mode=cfg.mode,
        threshold=cfg.threshold,
        alpha_max=cfg.alpha_max,
        seed=cfg.seed,
    )
    rows: list[Any] = []
    if args.model and args.dev_items:
        from llmcore import load_model_and_tokenizer
        from monica_syco.evaluate import choose_alpha_max, evaluate, tune_threshold
        from monica_syco.items import load_items

        model, tok = load_model_and_tokenizer(args.model, device=args.device)
        dev = load_items(args.dev_items)
        gen = {"max_new_tokens": cfg.max_new_tokens}
        if cfg.tune_threshold:
            cal = cal.with_(
                threshold=tune_threshold(evaluate(model, tok, dev, "none", mon, **gen).records)
            )
        grid = tuple(float(x) for x in cfg.alpha_grid.split(","))
        alpha, rows = choose_alpha_max(model, tok, dev, mon, cal, grid, **gen)
        cal = cal.with_(alpha_max=alpha, alpha_min=min(cal.alpha_min, alpha))
    cal.metrics = {"alpha_rows": rows}
    mon.save(args.out)
    cal.save(args.out)
    print(
        json.dumps(
            {
                "layers": mon.layers,
                **mon.metrics,
                "alpha_max": cal.alpha_max,
                "threshold": cal.threshold,
            }
        )
    )
    return 0


def _monitor_and_cal(args: argparse.Namespace) -> tuple[Any, Any]:
    from llmcore.config import config_from_args
    from monica_syco.calibrator import Calibrator
    from monica_syco.config import MonitorSettings
    from monica_syco.monitor import SycophancyMonitor

    s = config_from_args(MonitorSettings, args)
    mon = SycophancyMonitor.load(args.monitor)
    cal = None
    if args.calibrator:
        over = {
            k: getattr(s, k)
            for k in (
                "threshold",
                "release_gap",
                "alpha_min",
                "alpha_max",
                "mode",
                "scope",
                "apply_to_answer",
                "logit_beta",
            )
        }
        cal = Calibrator.load(args.calibrator, **over)
    return (mon, cal), s  # type: ignore[return-value]


def cmd_generate(args: argparse.Namespace) -> int:
    from llmcore.data import ResultsWriter
    from llmcore.runtime import set_seed
    from monica_syco.collect import run_items
    from monica_syco.items import SycItem, final_answer, jsonable, load_items

    (mon, cal), s = _monitor_and_cal(args)
    set_seed(args.seed)
    model, tok = _load(args)
    items = load_items(args.items) if args.items else [SycItem("prompt", args.prompt, None)]
    writer = ResultsWriter(args.out) if args.out else None
    if writer is not None:
        items = writer.pending([{"id": it.id, "it": it} for it in items])
        items = [r["it"] for r in items]
    gen = {"max_new_tokens": args.max_new_tokens, "do_sample": args.do_sample}
    if args.do_sample:
        gen["temperature"] = args.temperature
    for chunk, out in run_items(
        model,
        tok,
        items,
        batch_size=args.batch_size,
        monitor=mon,
        calibrator=cal,
        segmenter=_segmenter(tok, s),
        layers_path=args.layers_path,
        strict=s.strict,
        **gen,
    ):
        for b, it in enumerate(chunk):
            row = {
                "id": it.id,
                "method": "monica" if cal else "monitor",
                "prompt": it.chat(),
                "text": out.texts[b],
                "steps": out.steps[b],
                "sds": out.sds[b],
                "interventions": out.interventions[b],
                "final_answer": final_answer(out.texts[b]),
                "n_tokens": out.new_tokens[b],
                "n_forward": out.n_forward,
            }
            if writer is not None:
                writer.write(jsonable(row))
            else:
                print(json.dumps(row))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from llmcore.data import atomic_write_json
    from llmcore.runtime import set_seed
    from monica_syco.evaluate import evaluate
    from monica_syco.items import jsonable, load_items

    (mon, cal), s = _monitor_and_cal(args)
    set_seed(args.seed)
    model, tok = _load(args)
    items = load_items(args.items)
    report: dict[str, Any] = {}
    for m in args.methods.split(","):
        r = evaluate(
            model,
            tok,
            items,
            m,
            mon,
            cal,
            segmenter=_segmenter(tok, s),  # type: ignore[arg-type]
            batch_size=args.batch_size,
            max_new_tokens=args.max_new_tokens,
        )
        report[m] = {"metrics": r.metrics, "by_source": r.by_source}
        print(json.dumps({"method": m, **{k: round(v, 4) for k, v in r.metrics.items()}}))
        if args.traj_out:
            from llmcore.data import ResultsWriter

            w = ResultsWriter(args.traj_out, id_key="key")
            for rec in r.records:
                w.write(jsonable({"key": f"{m}:{rec['id']}", **rec}))
    atomic_write_json(args.out, jsonable(report))
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from llmcore.data import read_jsonl
    from monica_syco.generate import score_trajectory
    from monica_syco.monitor import SycophancyMonitor
    from monica_syco.world import render

    mon = SycophancyMonitor.load(args.monitor)
    model, tok = _load(args)
    out = []
    for row in read_jsonl(args.traj):
        prompt = row["prompt"]
        ptext = prompt if isinstance(prompt, str) else render(tok, prompt)
        pid = tok(ptext, add_special_tokens=False)["input_ids"]
        gid = tok(row["text"], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        steps, sds = score_trajectory(model, tok, mon, pid, gid, layers_path=args.layers_path)
        out.append({"id": row.get("id"), "steps": steps, "sds": sds})
    text = "".join(json.dumps(r) + "\n" for r in out)
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from llmcore.config import config_from_args
    from monica_syco.bench import format_table, run_bench
    from monica_syco.config import BenchConfig

    cfg = config_from_args(BenchConfig, args)
    res = run_bench(cfg)
    print(format_table(res))
    if args.json_out:
        args.json_out.write_text(json.dumps(res, indent=2))
    if args.plot:
        from monica_syco.bench import plot

        plot(res, args.plot)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from llmcore.cli import run_main

    return run_main("monica-syco", build_parser, argv)


if __name__ == "__main__":
    raise SystemExit(main())
