"""The planted-effects experiment: does the analysis layer recover known feedback effects?

A seeded :class:`~cuda_analyst.llm.MockLLM` writes pre-written kernels with probabilities that
are a known function of the injected feedback; the evaluator (C backend, CPU), freezing,
injection and attribution are the real code. Because the function is known, the analytic
value of every coalition is known too: ``v(S) = mean over samples of 1 - (1 - q_S)^k`` for
``k`` trials counted by their highest status. This validates the method's machinery; it says
nothing about how real LLMs plan, nor about GPUs.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cuda_analyst.attribution import attribute, shapley, subsets
from cuda_analyst.backends import CBackend
from cuda_analyst.evaluator import EvalCache, Evaluator
from cuda_analyst.intervene import intervene
from cuda_analyst.llm import MockLLM
from cuda_analyst.masks import AnalysisMask, coalition_masks
from cuda_analyst.tasks import get_task
from cuda_analyst.trajectory import evolve, group_openevolve_by_gen, load_frozen

FULL = "p7-d3-a3-p3"


def make_evaluators(tasks: Sequence[str], cache: EvalCache | None = None) -> dict[str, Evaluator]:
    backend = CBackend()
    cache = cache if cache is not None else EvalCache()
    return {t: Evaluator(get_task(t), backend, cache=cache) for t in tasks}


def frozen_samples(
    evaluators: dict[str, Evaluator],
    *,
    parents_per_task: int = 10,
    seed: int = 0,
    generations: int = 4,
    population: int = 4,
    workdir: str | Path | None = None,
) -> list[dict[str, Any]]:
    """Reference trajectories (strong mock, no injection), frozen, ``parents_per_task`` each."""
    root = Path(workdir or tempfile.mkdtemp(prefix="cuda-analyst-exp-"))
    out = []
    for t, ev in evaluators.items():
        evolve(ev, MockLLM("strong", seed), root / "runs" / t, generations=generations,
               population=population, children=1, seed=seed)  # fmt: skip
        group_openevolve_by_gen(root / "runs" / t / "checkpoints", root / "frozen" / t)
        for smp in load_frozen(root / "frozen" / t)[:parents_per_task]:
            smp["key"] = f"{t}/{smp['key']}"
            out.append(smp)
    return out


def analytic_values(
    samples: Sequence[dict[str, Any]],
    evaluators: dict[str, Evaluator],
    players=("d", "a", "p"),
    *,
    num_trials: int = 5,
) -> dict[frozenset[str], float]:
    """The planted ``v(S)`` (pass-or-better, pooled over samples) of every coalition."""
    failed = [not evaluators[s["task"]].evaluate(s["code"]).passed for s in samples]
    v = {}
    for c in subsets(players):
        # a failed parent has no analyzer/profiler report; a passing one no debugger report
        qs = [
            MockLLM.success_probability(f, (c & {"d"}) if f else (c & {"a", "p"})) for f in failed
        ]
        v[c] = float(np.mean([1 - (1 - q) ** num_trials for q in qs]))
    return v


def per_sample_values(records_dir: Path, masks: Sequence[str]) -> dict[str, np.ndarray]:
    """Per (run, sample) pass-or-better indicators of each mask, aligned by record id."""
    from llmcore.data import read_jsonl

    out = {}
    for m in masks:
        rows = sorted(read_jsonl(records_dir / m / "records.jsonl"), key=lambda r: r["id"])
        out[m] = np.array([r["highest_status"] in ("PASS", "FAST") for r in rows], dtype=float)
    return out


def run_planted(
    tasks: Sequence[str],
    *,
    cache: EvalCache | None = None,
    parents_per_task: int = 10,
    num_run: int = 3,
    num_trials: int = 5,
    seed: int = 0,
    drift_seeds: int = 3,
    drift_generations: int = 8,
    workdir: str | Path | None = None,
) -> dict[str, Any]:
    """Everything the claim checks: Shapley (estimated vs analytic), the a x p interaction with
    a parent-level bootstrap CI, aligned / none / misaligned planning, replay of strong plans,
    and the across-seed std of frozen vs end-to-end evaluation. Runs and records go to
    ``workdir`` (a new temporary folder when omitted; kept and returned as ``"workdir"``)."""
    from cuda_analyst.attribution import bootstrap_interaction

    root = Path(workdir or tempfile.mkdtemp(prefix="cuda-analyst-exp-"))
    evs = make_evaluators(tasks, cache)
    samples = frozen_samples(evs, parents_per_task=parents_per_task, seed=seed, workdir=root)
    masks = [str(m) for m in coalition_masks()]
    strong = MockLLM("strong", seed)
    res = intervene(
        samples,
        masks,
        strong,
        evs,
        num_run=num_run,
        num_trials=num_trials,
        out_dir=root / "gen",
        seed=seed,
    )
    att = attribute(res, metric="pass_or_better")
    va = analytic_values(samples, evs, num_trials=num_trials)
    phi_true = shapley(va, ("d", "a", "p"))
    # interaction a x p, bootstrapped over parents (rollouts of a parent stay together)
    per_unit = {}
    for c in subsets(("a", "p")):
        m = str(AnalysisMask(plan=7, **dict.fromkeys(c, 3)))
        per_unit[c] = _by_parent(root / "gen" / m)
    inter = bootstrap_interaction(per_unit, ("a", "p"), seed=seed)
    # planning: aligned full mask vs no decision block vs misaligned reports
    none = intervene(
        samples, ["p0-d0-a0-p0"], strong, evs, num_run=num_run, num_trials=num_trials, seed=seed
    )
    mis = intervene(
        samples,
        [FULL],
        strong,
        evs,
        num_run=num_run,
        num_trials=num_trials,
        seed=seed,
        misaligned=True,
    )
    placebo = intervene(
        samples,
        ["p7-d0-a0-p0"],
        strong,
        evs,
        num_run=num_run,
        num_trials=num_trials,
        seed=seed,
        placebo=True,
    )
    rate = lambda r, m: _pooled_rate(r[m])  # noqa: E731
    # replay: the weak mock on its own plans vs on the strong run's recorded decisions
    weak = MockLLM("weak", seed)
    weak_own = intervene(
        samples, [FULL], weak, evs, num_run=num_run, num_trials=num_trials, seed=seed
    )
    weak_replay = intervene(samples, [FULL], weak, evs, num_run=num_run, num_trials=num_trials, seed=seed,
                            replay_from=root / "gen" / FULL)  # fmt: skip
    drift = drift_comparison(
        samples,
        evs,
        res,
        seeds=drift_seeds,
        seed=seed,
        generations=drift_generations,
        workdir=root / "e2e",
    )
    return {
        "tasks": list(tasks),
        "n_samples": len(samples),
        "shapley": att.per_gen["all"]["shapley"],
        "shapley_analytic": phi_true,
        "values": att.per_gen["all"]["values"],
        "values_analytic": {
            str(AnalysisMask(plan=7, **dict.fromkeys(c, 3))): x for c, x in va.items()
        },
        "synergy": att.per_gen["all"]["synergy"],
        "interaction_ap": {"point": inter[0], "ci": [inter[1], inter[2]]},
        "pass_rate": {
            "aligned": rate(res, FULL),
            "none": rate(none, "p0-d0-a0-p0"),
            "misaligned": rate(mis, FULL),
            "placebo": rate(placebo, "p7-d0-a0-p0"),
        },
        "replay": {
            "weak_own": rate(weak_own, FULL),
            "weak_with_strong_plans": rate(weak_replay, FULL),
        },
        "drift": drift,
        "llm_calls": strong.calls,
        "workdir": str(root),
    }


def _by_parent(mask_dir: Path) -> np.ndarray:
    from llmcore.data import read_jsonl

    acc: dict[str, list[float]] = {}
    for r in read_jsonl(mask_dir / "records.jsonl"):
        acc.setdefault(r["id"].split("/", 1)[1], []).append(
            float(r["highest_status"] in ("PASS", "FAST"))
        )
    return np.array([np.mean(acc[k]) for k in sorted(acc)])


def _pooled_rate(runs: list[dict[str, dict[str, int]]]) -> float:
    tot = sum(c["total"] for r in runs for c in r.values())
    ok = sum(c["pass"] + c["fast"] for r in runs for c in r.values())
    return ok / tot if tot else float("nan")


def _gen_rates(per_gen: dict[str, dict[str, int]]) -> dict[str, float]:
    return {g: (c["pass"] + c["fast"]) / c["total"] for g, c in per_gen.items() if c["total"]}


def drift_comparison(
    samples: Sequence[dict[str, Any]],
    evaluators: dict[str, Evaluator],
    frozen_results: dict[str, list[dict[str, dict[str, int]]]],
    *,
    seeds: int = 3,
    seed: int = 0,
    generations: int = 4,
    population: int = 4,
    masks: Sequence[str] | None = None,
    workdir: str | Path | None = None,
) -> dict[str, Any]:
    """Across-seed std of generation-level pass-or-better rates (pooled over tasks): end-to-end
    ablation (a full evolution per mask and seed) vs frozen evaluation (rollouts of one frozen
    trajectory). Returns the mean std over masks and generations for each, and their ratio."""
    root = Path(workdir or tempfile.mkdtemp(prefix="cuda-analyst-e2e-"))
    masks = list(masks or frozen_results)
    e2e_std, frz_std = [], []
    calls = tokens = 0
    for m in masks:
        per_seed = []
        for s in range(seeds):
            pooled: dict[str, dict[str, int]] = {}
            for t, ev in evaluators.items():
                llm = MockLLM("strong", seed + 1000 + s)
                d = evolve(ev, llm, root / m / f"s{s}" / t, generations=generations,
                           population=population, children=1, mask=AnalysisMask.parse(m), seed=seed + 1000 + s)  # fmt: skip
                calls, tokens = calls + llm.calls, tokens + llm.tokens
                import json

                for g, c in json.loads((d / "stats.json").read_text()).items():
                    acc = pooled.setdefault(g, dict.fromkeys(c, 0))
                    for k, v in c.items():
                        acc[k] += v
            per_seed.append(_gen_rates(pooled))
        gens = sorted(set.intersection(*(set(r) for r in per_seed)))
        e2e_std += [float(np.std([r[g] for r in per_seed])) for g in gens]
        runs = [_gen_rates(r) for r in frozen_results[m]]
        fg = sorted(set.intersection(*(set(r) for r in runs)))
        frz_std += [float(np.std([r[g] for r in runs])) for g in fg]
    e, f = float(np.mean(e2e_std)), float(np.mean(frz_std))
    return {
        "e2e_std": e,
        "frozen_std": f,
        "ratio": e / f if f > 0 else float("inf"),
        "masks": masks,
        "seeds": seeds,
        "e2e_llm_calls": calls,
        "e2e_tokens": tokens,
    }
