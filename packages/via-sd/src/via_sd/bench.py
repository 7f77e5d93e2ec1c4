"""Side-by-side benchmark: AR, standard SD, HF assisted generation and VIA-SD
on the same prompts in one process, with forward counts, wall-clock medians, rejection rates,
accuracy, ratios against AR and SD, measured per-forward latencies and the theory's
prediction."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from via_sd.baselines import hf_assisted_generate
from via_sd.config import ViaSDConfig
from via_sd.decoding import autoregressive_generate, speculative_generate, via_sd_generate
from via_sd.errors import ViaSDConfigError
from via_sd.slim import FullModel, SlimVerifier
from via_sd.stats import GenerationResult
from via_sd.theory import modelled_latency, via_block_model, via_vs_sd_block_cost

METHODS = ("ar", "sd", "hf", "via")
COUNTERS = (
    "tokens",
    "target_forwards",
    "target_tokens_processed",
    "slim_forwards",
    "slim_tokens_processed",
    "draft_forwards",
    "draft_tokens_processed",
    "drafted",
    "tier_a",
    "tier_b",
    "tier_c",
    "rejections",
    "rejections_b",
    "rejections_c",
    "blocks",
)


def encode_prompt(tokenizer: Any, prompt: str) -> list[int]:
    """Token ids of ``prompt``; BOS is prepended when the tokenizer has one and did not add it."""
    ids = list(tokenizer(prompt)["input_ids"])
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is not None and (not ids or ids[0] != bos):
        ids = [bos, *ids]
    return ids


def default_score(output: str, reference: str | None) -> bool | None:
    """Exact match of the reference at the start of the output (None without a reference)."""
    if reference is None:
        return None
    return output.strip().startswith(reference.strip())


def run_method(
    method: str,
    target: nn.Module,
    drafter: nn.Module,
    slim: SlimVerifier,
    ids: list[int],
    cfg: ViaSDConfig,
) -> GenerationResult:
    if method == "ar":
        return autoregressive_generate(target, ids, cfg)
    if method == "sd":
        return speculative_generate(target, drafter, ids, cfg)
    if method == "hf":
        return hf_assisted_generate(target, drafter, ids, cfg)
    if method == "via":
        return via_sd_generate(target, drafter, slim, ids, cfg)
    raise ViaSDConfigError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")


@torch.no_grad()
def measure_latencies(
    target: nn.Module,
    drafter: nn.Module,
    slim: SlimVerifier,
    gamma: int,
    *,
    context: int = 24,
    repeats: int = 20,
) -> dict[str, float]:
    """Median per-forward latency (seconds) of q, p and q' at 1 and γ+1 query tokens on a
    ``context``-token cache, and the ratios c = t_p/t_q and c_s = t_q'/t_q (at 1 token).

    The six timings are taken round-robin (one of each per repeat, the first two repeats
    discarded as warm-up), so a change of machine load during the measurement shifts all of
    them alike instead of skewing the ratios."""
    dev = next(target.parameters()).device
    lms = (("target", FullModel(target)), ("draft", FullModel(drafter)), ("slim", slim))
    times: dict[str, list[float]] = {f"t_{n}_{q}": [] for n, _ in lms for q in (1, gamma + 1)}
    for rep in range(repeats + 2):
        for name, lm in lms:
            for q in (1, gamma + 1):
                cache = lm.new_cache()
                lm.forward(torch.ones(1, context, dtype=torch.long, device=dev), cache)
                x = torch.ones(1, q, dtype=torch.long, device=dev)
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                lm.forward(x, cache)
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                if rep >= 2:
                    times[f"t_{name}_{q}"].append(time.perf_counter() - t0)
    out: dict[str, float] = {k: statistics.median(v) for k, v in times.items()}
    out["c"] = out["t_draft_1"] / out["t_target_1"]
    out["c_s"] = out["t_slim_1"] / out["t_target_1"]
    out["c_verify"] = out[f"t_target_{gamma + 1}"] / out["t_target_1"]
    return out


def _modelled(tot: dict[str, int], lat: dict[str, float], gamma: int) -> float:
    """Counts × micro-benchmarked latencies for one method's totals."""
    total = 0.0
    for role in ("target", "slim", "draft"):
        calls, toks = tot.get(f"{role}_forwards", 0), tot.get(f"{role}_tokens_processed", 0)
        if calls:
            total += modelled_latency(
                calls, max(toks, calls), lat[f"t_{role}_1"], lat[f"t_{role}_{gamma + 1}"], gamma + 1
            )
    return total


def _mb(n_bytes: float) -> float:
    return n_bytes / 2**20


def kv_cache_bytes(model: nn.Module, tokens: int, layers: int | None = None) -> float:
    """Bytes of a full-length KV cache for ``model`` (``layers`` kept layers)."""
    cfg = model.config
    L = layers if layers is not None else cfg.num_hidden_layers
    heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    elt = next(model.parameters()).element_size()
    return 2.0 * L * heads * head_dim * tokens * elt


def summarize(
    records: list[dict[str, Any]],
    methods: Sequence[str],
    cfg: ViaSDConfig,
    lat: dict[str, float] | None,
    mem: dict[str, dict[str, float]],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per-method table rows and the summary record (medians, ratios, theory)."""
    rows: list[dict[str, Any]] = []
    per: dict[str, dict[str, Any]] = {}
    for m in methods:
        rs = [r for r in records if r["method"] == m]
        if not rs:
            continue
        tot = {k: sum(r.get(k, 0) for r in rs) for k in COUNTERS}
        corr = [r["correct"] for r in rs if r["correct"] is not None]
        divs = [r["divergence_rate"] for r in rs if r.get("divergence_rate") is not None]
        per[m] = {
            **tot,
            "wall_s_median": statistics.median(r["wall_time_s"] for r in rs),
            "wall_s_total": sum(r["wall_time_s"] for r in rs),
            "tokens_per_target_forward": tot["tokens"] / max(tot["target_forwards"], 1),
            "rejection_rate": (tot["rejections"] / tot["drafted"]) if tot["drafted"] else None,
            "accuracy": (sum(corr) / len(corr)) if corr else None,
            "divergence_rate": statistics.fmean(divs) if divs else None,
            **mem.get(m, {}),
        }
        if lat is not None:
            per[m]["modelled_wall_s"] = _modelled(tot, lat, cfg.gamma)
    for m, s in per.items():
        row = {
            "method": m,
            **{k: s[k] for k in ("tokens", "target_forwards", "slim_forwards", "draft_forwards")},
        }
        row["tok/tgt_fwd"] = s["tokens_per_target_forward"]
        row["rej_rate"] = s["rejection_rate"] if s["rejection_rate"] is not None else "-"
        row["acc"] = s["accuracy"] if s["accuracy"] is not None else "-"
        row["wall_s"] = s["wall_s_total"]
        if "modelled_wall_s" in s:
            row["modelled_s"] = s["modelled_wall_s"]
        for base in ("ar", "sd"):
            if base in per:
                b = per[base]
                row[f"tgt_fwd/{base}"] = s["target_forwards"] / max(b["target_forwards"], 1)
                row[f"speedup_vs_{base}"] = b["wall_s_total"] / max(s["wall_s_total"], 1e-12)
        if "peak_mem_mb" in s:
            row["mem_mb"] = s["peak_mem_mb"]
        rows.append(row)
    summary: dict[str, Any] = {
        "summary": True,
        "config": cfg.__dict__ | {},
        "methods": per,
        "latencies": lat,
    }
    if "via" in per and lat is not None:
        v = per["via"]
        reached = v["drafted"]
        if reached and v["blocks"]:
            a, b, e = v["tier_a"] / reached, v["tier_b"] / reached, v["tier_c"] / reached
            kb = 1.0 - v["rejections_b"] / v["tier_b"] if v["tier_b"] else 0.0
            kc = 1.0 - v["rejections_c"] / v["tier_c"] if v["tier_c"] else 1.0
            model = via_block_model(
                a, b, e, min(max(kb, 0.0), 1.0), kc, cfg.gamma, lat["c"], lat["c_s"]
            )
            summary["theory"] = {
                "a": a,
                "b": b,
                "e": e,
                "kappa_b": kb,
                "kappa_c": kc,
                **model.to_dict(),
                "measured_target_calls_per_block": v["target_forwards"] / v["blocks"],
            }
            # VIA beats SD per block only if the slim pass costs less than the share of
            # blocks in which q is spared (theory.via_vs_sd_block_cost)
            p_noq = 1.0 - v["target_forwards"] / v["blocks"]
            summary["versus_sd"] = {
                "p_no_target_measured": p_noq,
                "break_even_c_s": p_noq,
                "c_s": lat["c_s"],
                "block_cost_ratio_predicted": via_vs_sd_block_cost(
                    p_noq, cfg.gamma, lat["c"], lat["c_s"]
                ),
            }
            if "sd" in per:
                sd = per["sd"]
                summary["versus_sd"]["wall_ratio_measured"] = v["wall_s_total"] / max(
                    sd["wall_s_total"], 1e-12
                )
                summary["versus_sd"]["wall_ratio_modelled"] = v["modelled_wall_s"] / max(
                    sd["modelled_wall_s"], 1e-12
                )
    return rows, summary


def versus_sd_line(summary: dict[str, Any]) -> str | None:
    """One line on why VIA-SD is or is not faster than SD here (``None`` without the data)."""
    vs = summary.get("versus_sd")
    if not vs:
        return None
    head = ""
    if "wall_ratio_measured" in vs:
        head = (
            f"VIA/SD wall {vs['wall_ratio_measured']:.3f} measured, "
            f"{vs['wall_ratio_modelled']:.3f} modelled; "
        )
    verdict = "pays off" if vs["c_s"] < vs["break_even_c_s"] else "cannot pay off"
    return (
        f"{head}the slim pass {verdict}: it costs c_s = {vs['c_s']:.2f} of a target forward "
        f"and spares q in {vs['p_no_target_measured']:.2f} of blocks (VIA gains only when "
        "c_s is below that share)"
    )


def run_bench(
    target: nn.Module,
    drafter: nn.Module,
    tokenizer: Any,
    prompts: Sequence[dict[str, Any]],
    config: ViaSDConfig | None = None,
    *,
    slim: SlimVerifier | None = None,
    methods: Sequence[str] = METHODS,
    repeats: int = 3,
    warmup: int = 1,
    out: str | Path | None = None,
    score: Callable[[str, str | None], bool | None] = default_score,
    latencies: bool = True,
    progress: bool = True,
) -> dict[str, Any]:
    """Run ``methods`` on every prompt (counters from one run, wall-clock = median of
    ``repeats`` after ``warmup``); write one JSONL record per method and prompt to ``out``
    (resumable, :class:`llmcore.data.ResultsWriter`) and return ``{"rows", "summary",
    "records"}``."""
    from llmcore.data import ResultsWriter, atomic_write_json

    cfg = config or ViaSDConfig()
    for m in methods:
        if m not in METHODS:
            raise ViaSDConfigError(f"unknown method {m!r}; choose from {', '.join(METHODS)}")
    if repeats < 1 or warmup < 0:
        raise ViaSDConfigError(f"need repeats >= 1 and warmup >= 0, got {repeats}, {warmup}")
    if cfg.eos_token_id is None and getattr(tokenizer, "eos_token_id", None) is not None:
        cfg = replace(cfg, eos_token_id=tokenizer.eos_token_id)
    slim = slim or SlimVerifier(target)
    writer = ResultsWriter(out, id_key="key") if out is not None else None
    records: list[dict[str, Any]] = []
    dev = next(target.parameters()).device
    mem: dict[str, dict[str, float]] = {}
    p_bytes = {
        "target": sum(p.numel() * p.element_size() for p in target.parameters()),
        "draft": sum(p.numel() * p.element_size() for p in drafter.parameters()),
    }
    work = [(m, p) for m in methods for p in prompts]
    for m, p in tqdm(work, desc="bench", disable=not progress):
        key = f"{m}/{p['id']}"
        if writer is not None and writer.is_done(key):
            continue
        ids = encode_prompt(tokenizer, p["prompt"])
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        res = None
        walls = []
        for i in range(warmup + repeats):
            r = run_method(m, target, drafter, slim, ids, replace(cfg, measure_divergence=False))
            if i >= warmup:
                walls.append(r.stats.wall_time_s)
            res = res or r
        # counters are deterministic: score the first run; divergence costs an extra q pass
        if cfg.measure_divergence or m == "via":
            res_div = run_method(
                m, target, drafter, slim, ids, replace(cfg, measure_divergence=True)
            )
            div = res_div.stats.divergence_rate
        else:
            div = None
        st = res.stats
        text = tokenizer.decode(res.new_tokens, skip_special_tokens=True)
        rec = {
            "key": key,
            "method": m,
            "id": p["id"],
            "output": text,
            **{k: getattr(st, k) for k in COUNTERS},
            "slim_tokens_processed": st.slim_tokens_processed,
            "rejection_rate": st.rejection_rate,
            "wall_time_s": statistics.median(walls),
            "divergence_rate": div,
            "lossless": st.lossless,
            "correct": score(text, p.get("reference")),
        }
        seq_len = len(ids) + st.tokens
        kv = kv_cache_bytes(target, seq_len) if m != "via" or st.target_forwards else 0.0
        if m in ("sd", "hf", "via"):
            kv += kv_cache_bytes(drafter, seq_len)
        if m == "via":
            kv += kv_cache_bytes(target, seq_len, layers=slim.num_layers - len(slim.skip_layers))
        params = p_bytes["target"] + (p_bytes["draft"] if m != "ar" else 0)
        peak = _mb(torch.cuda.max_memory_allocated(dev)) if dev.type == "cuda" else _mb(params + kv)
        mem.setdefault(m, {"peak_mem_mb": 0.0})
        mem[m]["peak_mem_mb"] = max(mem[m]["peak_mem_mb"], peak)
        rec["peak_mem_mb"] = peak
        records.append(rec)
        if writer is not None:
            writer.write(rec)
    if writer is not None:
        records = [r for r in _read(out) if r.get("method") in methods]
        for r in records:
            mem.setdefault(r["method"], {"peak_mem_mb": 0.0})
            mem[r["method"]]["peak_mem_mb"] = max(
                mem[r["method"]]["peak_mem_mb"], r.get("peak_mem_mb", 0.0)
            )
    lat = measure_latencies(target, drafter, slim, cfg.gamma) if latencies else None
    rows, summary = summarize(records, methods, cfg, lat, mem)
    if out is not None:
        atomic_write_json(Path(str(out) + ".summary.json"), {**summary, "rows": rows})
    return {"rows": rows, "summary": summary, "records": records}


def _read(path: str | Path) -> list[dict[str, Any]]:
    from llmcore.data import read_jsonl

    return read_jsonl(path)


def plot(summary: dict[str, Any], path: str | Path) -> bool:
    """Bar plots of speedup vs AR (wall and target forwards) and rejection rate per method.
    Returns False when matplotlib (extra ``plot``) is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    per = summary["methods"]
    ms = list(per)
    ar = per.get("ar")
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.5))
    if ar:
        ax[0].bar(
            [f"{m}\nwall" for m in ms],
            [ar["wall_s_total"] / max(per[m]["wall_s_total"], 1e-12) for m in ms],
        )
        ax[0].bar(
            [f"{m}\nfwd" for m in ms],
            [ar["target_forwards"] / max(per[m]["target_forwards"], 1) for m in ms],
        )
        ax[0].set_title("speedup vs AR (wall, target forwards)")
    ax[1].bar(ms, [per[m]["rejection_rate"] or 0.0 for m in ms])
    ax[1].set_title("rejection rate")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True
