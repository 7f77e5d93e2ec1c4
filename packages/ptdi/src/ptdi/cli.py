"""``ptdi`` command line: score, select, evaluate, simulate, demo-tiny, bench.

``ptdi --help`` imports neither torch nor transformers (heavy imports live in the commands).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(type(o).__name__)


def _write_json(path: str | Path, obj: Any) -> None:
    from llmcore.data import atomic_write_json

    atomic_write_json(path, json.loads(json.dumps(obj, default=_json_default)))


def _cmd_score(args: argparse.Namespace) -> int:
    from llmcore.config import config_from_args
    from ptdi.config import ScoreConfig, parse_names
    from ptdi.errors import PTDIConfigError
    from ptdi.io import load_rows, write_scores
    from ptdi.scoring import (
        BackendScorer,
        MembershipScorer,
        check_k,
        check_score_names,
        load_target,
    )

    cfg = config_from_args(ScoreConfig, args)
    if not cfg.model or not cfg.data:
        raise PTDIConfigError("ptdi score needs --model and --data")
    names = check_score_names(parse_names(cfg.scores))
    check_k(cfg.mink_k)
    rows = load_rows(cfg.data, cfg.text_key, cfg.split)
    if cfg.backend == "vllm":
        from llmcore.generation import get_backend

        scorer: Any = BackendScorer(None, names, cfg.mink_k)  # refuses minkpp/ref before loading
        scorer.backend = get_backend("vllm", cfg.model)
    elif cfg.backend == "hf":
        model, tok = load_target(
            cfg.model, revision=cfg.revision, device=cfg.device, dtype=cfg.dtype,
            adapter=cfg.adapter, merge_adapter=cfg.merge_adapter,
        )  # fmt: skip
        ref = None
        if cfg.reference_model:
            ref, _ = load_target(cfg.reference_model, device=cfg.device, dtype=cfg.dtype)
        scorer = MembershipScorer(
            model, tok, scores=names, k=cfg.mink_k, max_length=cfg.max_length,
            batch_size=cfg.batch_size, reference_model=ref, progress=True,
        )  # fmt: skip
        if cfg.drop_short:
            short = set(scorer.short_indices([r["text"] for r in rows]))
            if short:
                print(f"dropping {len(short)} text(s) under 2 tokens", file=sys.stderr)
            rows = [r for i, r in enumerate(rows) if i not in short]
    else:
        raise PTDIConfigError(f"backend must be 'hf' or 'vllm', got {cfg.backend!r}")
    scores = scorer.score([r["text"] for r in rows], ids=[r["id"] for r in rows])
    meta = {"model": cfg.model, "revision": cfg.revision, "adapter": cfg.adapter,
            "k": cfg.mink_k, "max_length": cfg.max_length, "backend": cfg.backend}  # fmt: skip
    mp = write_scores(cfg.out, rows, scores, meta)
    print(f"wrote {len(rows)} rows to {cfg.out} (metadata {mp})")
    return 0


def _cmd_select(args: argparse.Namespace) -> int:
    import numpy as np

    from llmcore.config import config_from_args
    from ptdi.config import SelectConfig
    from ptdi.errors import PTDIInputError
    from ptdi.io import read_scores
    from ptdi.stats import ptdi_select

    cfg = config_from_args(SelectConfig, args)
    rows, vals, _ = read_scores(cfg.scores, cfg.score)
    roles = np.array([r["role"] for r in rows], dtype=object)
    cal_idx = np.flatnonzero(roles == "calibration")
    test_idx = np.flatnonzero(roles == "test")
    if cal_idx.size == 0 or test_idx.size == 0:
        raise PTDIInputError(
            f"{cfg.scores} needs rows with role 'calibration' ({cal_idx.size}) and 'test' "
            f"({test_idx.size})"
        )
    labels = [rows[i]["label"] for i in test_idx]
    lab = np.array(labels, dtype=int) if all(x in (0, 1) for x in labels) else None
    res = ptdi_select(
        vals[cal_idx], vals[test_idx], cfg.alpha, pi_estimator=cfg.pi_estimator,
        jkbb_gamma=cfg.jkbb_gamma, jkbb_z=cfg.jkbb_z, lam=cfg.lam,
        ties="randomized" if cfg.randomized_ties else "conservative", labels=lab, rng=cfg.seed,
    )  # fmt: skip
    ids = [rows[i]["id"] for i in test_idx]
    out = {
        "alpha": cfg.alpha, "pi_estimator": cfg.pi_estimator, "jkbb_gamma": cfg.jkbb_gamma,
        "jkbb_z": cfg.jkbb_z, "pi0_hat": float(res.pi0_hat), "n_cal": res.n_cal, "m": res.m,
        "threshold": float(res.threshold),
        "selected_ids": [i for i, s in zip(ids, res.selected, strict=True) if s],
        "pvalues": dict(zip(map(str, ids), res.pvalues.tolist(), strict=True)),
        "scaled_pvalues": dict(zip(map(str, ids), res.scaled_pvalues.tolist(), strict=True)),
        "fdp": None if res.fdp is None else float(res.fdp),
        "power": None if res.power is None else float(res.power),
    }  # fmt: skip
    _write_json(cfg.out, out)
    print(
        f"selected {len(out['selected_ids'])}/{res.m} at alpha={cfg.alpha} "
        f"(pi0_hat={out['pi0_hat']:.3f}, n_cal={res.n_cal}) -> {cfg.out}"
    )
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from llmcore.cli import print_table
    from llmcore.config import config_from_args
    from ptdi.config import EvaluateConfig, parse_floats, parse_names
    from ptdi.io import read_scores
    from ptdi.stats import evaluate

    cfg = config_from_args(EvaluateConfig, args)
    rows, vals, meta = read_scores(cfg.scores, cfg.score)
    lab = [r["label"] for r in rows]
    mem = vals[[i for i, x in enumerate(lab) if x == 1]]
    non = vals[[i for i, x in enumerate(lab) if x == 0]]
    res = evaluate(
        mem, non, parse_floats(cfg.alphas, "alphas"), parse_names(cfg.pi_estimators),
        n_exp=cfg.n_exp, test_member_ratio=cfg.test_member_ratio,
        test_nonmember_ratio=cfg.test_nonmember_ratio, cal_ratio=cfg.cal_ratio,
        jkbb_gamma=cfg.jkbb_gamma, jkbb_z=cfg.jkbb_z, seed=cfg.seed,
    )  # fmt: skip
    res["score"], res["model"] = cfg.score, meta.get("model")
    table = []
    for est, r in res["results"].items():
        for j, a in enumerate(res["alphas"]):
            table.append({"estimator": est, "alpha": a, "FDP": round(r["FDP"][j], 4),
                          "Power": round(r["Power"][j], 4), "TPR": round(r["TPR"][j], 4),
                          "FPR": round(r["FPR"][j], 4)})  # fmt: skip
    print_table(table)
    _write_json(cfg.out, res)
    return 0


def _cmd_simulate(args: argparse.Namespace) -> int:
    from llmcore.cli import print_table
    from llmcore.config import config_from_args
    from ptdi.config import SimulateConfig, parse_floats, parse_names
    from ptdi.stats import simulate

    cfg = config_from_args(SimulateConfig, args)
    res = simulate(
        cfg.n_cal, cfg.m, cfg.pi, cfg.member_shift, parse_floats(cfg.alphas, "alphas"),
        reps=cfg.reps, estimators=parse_names(cfg.estimators), seed=cfg.seed,
    )  # fmt: skip
    table = []
    for est, r in res["results"].items():
        for j, a in enumerate(res["alphas"]):
            table.append({"estimator": est, "alpha": a, "FIR": round(r["fir"][j], 4),
                          "FIR_se": round(r["fir_se"][j], 4), "power": round(r["power"][j], 4)})  # fmt: skip
    print_table(table)
    if cfg.out:
        _write_json(cfg.out, res)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from ptdi.demo import run

    res = run()
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        _write_json(Path(args.out) / "demo.json", res)
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from ptdi.bench import run_bench

    run_bench(out_dir=args.out, quick=args.quick, plot=not args.no_plot)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from llmcore.config import add_config_arguments
    from ptdi.config import EvaluateConfig, ScoreConfig, SelectConfig, SimulateConfig

    ap = argparse.ArgumentParser(
        prog="ptdi",
        description="Provable training data identification: conformal p-values, JKBB, scaled BH",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, cls, fn, hlp in (
        ("score", ScoreConfig, _cmd_score, "membership scores of a model on a text set"),
        ("select", SelectConfig, _cmd_select, "PTDI selection at level alpha"),
        ("evaluate", EvaluateConfig, _cmd_evaluate, "FDP/Power over the authors' random splits"),
        ("simulate", SimulateConfig, _cmd_simulate, "Gaussian-score simulation"),
    ):
        p = sub.add_parser(name, help=hlp)
        add_config_arguments(p, cls)
        p.set_defaults(func=fn)
    d = sub.add_parser("demo-tiny", help="tiny model trained on known members, end to end")
    d.add_argument("--out", default=None, help="folder for demo.json")
    d.set_defaults(func=_cmd_demo)
    b = sub.add_parser("bench", help="timings, FIR/power table, power vs calibration size")
    b.add_argument("--out", default="ptdi-bench", help="folder for bench.json and the plot")
    b.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    b.add_argument("--no-plot", action="store_true", help="skip the matplotlib plot")
    b.set_defaults(func=_cmd_bench)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    from llmcore.cli import run_main

    return run_main("ptdi", build_parser, argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
