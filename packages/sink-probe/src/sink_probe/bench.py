"""``sink-probe bench``: probe overhead and peak memory against a plain forward, and the
training throughput of each architectural variant.

Every path of one length runs in a fresh subprocess (one torch thread), so peak RSS
(``ru_maxrss``) belongs to that path alone: a plain SDPA forward, the streaming probe, and the
naive ``output_attentions=True`` forward with every layer's maps measured by the pure functions.
The probe and naive processes alternate each timed run with a plain SDPA forward on the same
batch and report the ratio of the fastest of each, so both sides of a ratio see the same load
(the plain forward's memory is below either path's, so their peak RSS is unaffected).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PATHS = ("plain", "probe", "naive")


def _one(model_name: str, path: str, T: int, batch: int, reps: int) -> dict[str, Any]:
    import torch

    from sink_probe.cli import load_model
    from sink_probe.probe import probe

    torch.set_num_threads(1)
    model, tok = load_model(model_name)
    V = model.config.vocab_size
    g = torch.Generator().manual_seed(T)
    ids = torch.randint(3, V, (batch, T), generator=g)
    ids[:, 0] = tok.bos_token_id if tok.bos_token_id is not None else ids[0, 0]
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    words = [" ".join(map(str, r.tolist())) for r in ids]

    class _IdTok:  # feeds fixed ids to probe without re-tokenising
        bos_token_id = None

        def __init__(self):
            self.rows = iter(ids.tolist())

        def __call__(self, text, add_special_tokens=True):
            return {"input_ids": next(self.rows)}

    def plain() -> None:
        model.config._attn_implementation = "sdpa"
        with torch.no_grad():
            model(input_ids=ids, use_cache=False)
        model.config._attn_implementation = "eager"

    def run() -> None:
        if path == "plain":
            plain()
        elif path == "probe":
            probe(model, _IdTok(), words, T=T, batch_size=batch, tau_abs=None, tau_ratio=50.0)
        else:
            probe(model, _IdTok(), words, T=T, batch_size=batch, stream=False, tau_abs=None,
                  tau_ratio=50.0)  # fmt: skip

    # the probe and naive paths also time a plain forward right before each of their own, so
    # their ratio to the plain forward compares two runs under the same machine load
    times, plain_times = [], []
    for _ in range(reps):
        if path != "plain":
            t0 = time.perf_counter()
            plain()
            plain_times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    out: dict[str, Any] = {
        "path": path, "T": T, "seconds": min(times),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "base_rss_mb": rss0 / 1024,
    }  # fmt: skip
    if plain_times:
        out["plain_seconds"] = min(plain_times)
        out["ratio"] = min(times) / min(plain_times)
    if path == "plain":
        from llmcore.hooks import capture_activations, layer_module_names
        from sink_probe.metrics import detect_massive

        names = layer_module_names(model)
        with torch.no_grad(), capture_activations(model, names) as acts:
            model(input_ids=ids, use_cache=False)
        t0 = time.perf_counter()
        for n in names:
            detect_massive(acts[n][0][0], tau_abs=None, tau_ratio=50.0)
        out["detect_ms_per_layer"] = 1000 * (time.perf_counter() - t0) / len(names)
    return out


def _spawn(model: str, path: str, T: int, batch: int, reps: int) -> dict[str, Any]:
    code = (
        "import json,sys; from sink_probe.bench import _one; "
        f"print('@@'+json.dumps(_one({model!r},{path!r},{T},{batch},{reps})))"
    )
    env = {**__import__("os").environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=1800)  # fmt: skip
    line = [x for x in r.stdout.splitlines() if x.startswith("@@")]
    if r.returncode != 0 or not line:
        return {"path": path, "T": T, "error": r.stderr.strip().splitlines()[-1:]}
    return json.loads(line[0][2:])


def train_throughput(steps: int = 50, warmup: int = 5, rounds: int = 2) -> list[dict[str, Any]]:
    """Tokens/s of each variant (d 64, 3 layers, batch 32, T 64) and its extra FLOPs per token
    relative to the baseline forward (``2 * n_params`` per token).

    Each variant first runs ``warmup`` untimed optimiser steps (allocator, kernels, optimiser
    state), then ``steps`` timed ones; the variants are timed in ``rounds`` interleaved rounds
    and the best round is kept, so a burst of load on a shared machine hits one round of every
    variant rather than one variant."""
    import dataclasses

    import torch

    from llmcore.zoo import recipe_tokenizer
    from llmcore.zoo.train import build_model, train_lm
    from sink_probe.errors import SinkProbeConfigError
    from sink_probe.kv_bias import patch_model
    from sink_probe.variants import VARIANTS, VariantSpec, intervention_for, variant_recipe

    if steps < 1 or warmup < 0 or rounds < 1:
        raise SinkProbeConfigError(
            f"train throughput needs steps >= 1, warmup >= 0, rounds >= 1; got {steps}, "
            f"{warmup}, {rounds}"
        )
    torch.set_num_threads(1)
    spec = VariantSpec(steps=steps)
    d, H, L, T = spec.d_model, spec.n_heads, spec.n_layers, spec.stream.seq_len
    dh = d // H
    models: dict[str, Any] = {}
    rows: dict[str, dict[str, Any]] = {}
    for v in VARIANTS:
        r = variant_recipe(v, spec)
        tok = recipe_tokenizer(r)
        base = build_model(r.model, tok)
        n_base = sum(p.numel() for p in base.parameters())
        cfg = intervention_for(v, spec)
        m = patch_model(base, cfg)
        if warmup:
            train_lm(m, tok, r.corpus.train[:256], dataclasses.replace(r.train, steps=warmup),
                     progress=False)  # fmt: skip
        models[v] = (m, tok, r)
        extra = 0.0
        if cfg.kv_bias or cfg.k_bias_only:
            extra += L * 2 * H * dh * (2 if cfg.kv_bias else 1)  # q.k' (+ p' v')
        if cfg.gate:
            extra += L * 2 * d * H * dh
        if cfg.attn_out_norm:
            extra += L * 4 * H * dh
        if cfg.qk_norm:
            extra += L * 8 * H * dh
        if cfg.suppress_massive is not None:
            extra += L * d  # one median pass per layer, amortised per token
        rows[v] = {"variant": v, "tokens_per_s": 0.0, "extra_flops_per_token": extra,
                   "extra_flops_rel": extra / (2 * n_base)}  # fmt: skip
    timed = dataclasses.replace(models["baseline"][2].train, steps=steps)
    for _ in range(rounds):
        for v, (m, tok, r) in models.items():
            t = train_lm(m, tok, r.corpus.train[:256], timed, progress=False)["train_seconds"]
            rows[v]["tokens_per_s"] = max(rows[v]["tokens_per_s"], steps * spec.batch_size * T / t)
    base_tps = rows["baseline"]["tokens_per_s"]
    for row in rows.values():
        row["speed_vs_baseline"] = row["tokens_per_s"] / base_tps
    return list(rows.values())


def run_bench(
    model: str = "zoo:tiny-llama",
    lengths: tuple[int, ...] = (64, 512, 2048),
    batch_size: int = 1,
    out_json: str | None = None,
    plot: str | None = None,
    train_steps: int = 50,
    reps: int = 3,
) -> dict[str, Any]:
    """Run the benchmark, print a Markdown table, write JSON and an optional plot."""
    from sink_probe.cli import markdown_table

    rows = []
    for T in lengths:
        res = {p: _spawn(model, p, T, batch_size, reps) for p in PATHS}
        plain = res["plain"].get("seconds")
        row: dict[str, Any] = {"T": T, "plain_s": plain}
        for p in ("probe", "naive"):
            row[f"{p}_x"] = res[p].get("ratio")  # to a plain forward timed in the same process
        for p in PATHS:
            row[f"{p}_rss_mb"] = res[p].get("peak_rss_mb")
        row["detect_ms_per_layer"] = res["plain"].get("detect_ms_per_layer")
        rows.append(row)
    print(markdown_table(rows))
    train = train_throughput(train_steps) if train_steps else []
    if train:
        print(markdown_table(train))
    out = {"model": model, "batch_size": batch_size, "lengths": list(lengths), "rows": rows,
           "train": train}  # fmt: skip
    if out_json:
        from llmcore.data import atomic_write_json

        atomic_write_json(Path(out_json), out)
    if plot:
        _plot(rows, plot)
    return out


def _plot(rows: list[dict[str, Any]], path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        from sink_probe.errors import SinkProbeConfigError

        raise SinkProbeConfigError(
            "--plot needs the plot extra: pip install 'sink-probe[plot]'"
        ) from exc
    Ts = [r["T"] for r in rows]
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.5))
    for p in ("probe", "naive"):
        ax[0].plot(Ts, [r[f"{p}_x"] for r in rows], marker="o", label=p)
        ax[1].plot(Ts, [r[f"{p}_rss_mb"] for r in rows], marker="o", label=p)
    ax[1].plot(Ts, [r["plain_rss_mb"] for r in rows], marker="o", label="plain")
    for a, y in zip(ax, ("time / plain SDPA forward", "peak RSS (MB)"), strict=True):
        a.set_xscale("log", base=2)
        a.set_xlabel("T")
        a.set_ylabel(y)
        a.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
