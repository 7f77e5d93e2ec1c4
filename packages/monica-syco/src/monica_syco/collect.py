"""Induction-then-merge training data (section 2.4): trajectories on clean and cued prompts,
trajectory and step labels, item-level splits, probe and calibration-vector fitting."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from monica_syco.calibrator import Calibrator
from monica_syco.errors import MonicaConfigError, MonicaDataError, MonicaError
from monica_syco.items import SycItem, answer_matches, final_answer
from monica_syco.monitor import RuleStepScorer, StepScorer, SycophancyMonitor, model_fingerprint
from monica_syco.probes import auroc, check_xy, make_probe
from monica_syco.segment import StepSegmenter


@dataclass
class StepDataset:
    """Pooled step states ``states [N, |L|, d]`` (float32) with labels and indices; rows of
    one trajectory are consecutive in step order (``traj_index``, ``step_index``). ``engaged``
    (optional) is 1 on the steps of any wrong-cue trajectory from its first step engaging the
    user's claim on, whatever the trajectory's final answer (it marks recovered steps too)."""

    states: np.ndarray
    labels: np.ndarray
    item_index: np.ndarray
    step_index: np.ndarray
    traj_index: np.ndarray
    layers: list[int]
    item_ids: list[str]
    hidden_size: int
    model_fingerprint: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    engaged: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.labels)

    def save(self, path: str | Path) -> None:
        """``steps.safetensors`` + ``steps.json``."""
        from safetensors.numpy import save_file

        from llmcore.data import atomic_write_json

        p = Path(path)
        p.mkdir(parents=True, exist_ok=True)
        arrays = {
            "states": np.ascontiguousarray(self.states.astype(np.float32)),
            "labels": self.labels.astype(np.int64),
            "item_index": self.item_index.astype(np.int64),
            "step_index": self.step_index.astype(np.int64),
            "traj_index": self.traj_index.astype(np.int64),
        }
        if self.engaged is not None:
            arrays["engaged"] = self.engaged.astype(np.int64)
        save_file(arrays, str(p / "steps.safetensors"))
        atomic_write_json(
            p / "steps.json",
            {
                "layers": self.layers,
                "item_ids": self.item_ids,
                "hidden_size": self.hidden_size,
                "model_fingerprint": self.model_fingerprint,
                "info": self.info,
            },
        )

    @classmethod
    def load(cls, path: str | Path) -> StepDataset:
        from safetensors.numpy import load_file

        p = Path(path)
        if not (p / "steps.json").exists():
            raise MonicaError(f"{p} has no steps.json; write one with `monica-syco collect`")
        meta = json.loads((p / "steps.json").read_text())
        t = load_file(str(p / "steps.safetensors"))
        return cls(
            t["states"],
            t["labels"],
            t["item_index"],
            t["step_index"],
            t["traj_index"],
            meta["layers"],
            meta["item_ids"],
            meta["hidden_size"],
            meta["model_fingerprint"],
            meta.get("info", {}),
            t.get("engaged"),
        )


def onset_labels(
    steps: list[str], sycophantic: bool, cued: str | None, labeler: Any
) -> list[int | None]:
    """Step labels (section 2.4, item 3): in a sycophantic trajectory, steps from the drift
    onset on (the first step engaging the user's claim) are 1; every other step is 0. A
    judge verdict that cannot be parsed gives ``None`` (the step is left out)."""
    if not sycophantic:
        return [0] * len(steps)
    onset = None
    out: list[int | None] = []
    for t, step in enumerate(steps):
        if isinstance(labeler, RuleStepScorer):
            hit: float | None = 1.0 if labeler.engages_claim(step, cued) else 0.0
        else:
            hit = labeler.score("", f"the answer is {cued}", steps[: t + 1])
        if hit is None and onset is None:
            out.append(None)
            continue
        if onset is None and hit:
            onset = t
        out.append(1 if onset is not None else 0)
    return out


def run_items(
    model: Any,
    tokenizer: Any,
    items: list[SycItem],
    *,
    batch_size: int = 32,
    progress: bool = False,
    **kw: Any,
) -> list[Any]:
    """``monica_generate`` over items in batches (kwargs pass through); one output per batch."""
    from tqdm.auto import tqdm

    from monica_syco.generate import monica_generate

    outs = []
    for i in tqdm(range(0, len(items), batch_size), disable=not progress, desc="generate"):
        chunk = items[i : i + batch_size]
        per = dict(kw)
        if kw.get("calibrator") is not None and kw["calibrator"].mode == "logit":
            n = int(kw.get("num_return_sequences", 1))
            per["cued_answers"] = [it.cued_answer or it.gold for it in chunk for _ in range(n)]
        per["contexts"] = [(it.question, it.cue_text) for it in chunk]
        outs.append((chunk, monica_generate(model, tokenizer, [it.chat() for it in chunk], **per)))
    return outs


def collect_steps(
    model: Any,
    tokenizer: Any,
    items: list[SycItem],
    layers: list[int],
    segmenter: StepSegmenter | None = None,
    labeler: Literal["rule"] | StepScorer = "rule",
    n_samples: int = 1,
    *,
    temperature: float = 1.0,
    max_new_tokens: int = 96,
    batch_size: int = 32,
    seed: int = 0,
    require_clean_correct: bool = True,
    progress: bool = False,
) -> StepDataset:
    """Induction (section 2.4): ``n_samples`` trajectories per prompt (sampling at
    ``temperature``; greedy when ``n_samples=1``), pooled step states at ``layers``,
    trajectory labels (sycophantic = cued answer, honest = gold, else dropped) and step
    labels from the drift onset."""
    import torch

    if n_samples < 1:
        raise MonicaConfigError(f"n_samples must be >= 1, got {n_samples}")
    lab: Any = RuleStepScorer() if labeler == "rule" else labeler
    if not isinstance(lab, RuleStepScorer) and not hasattr(lab, "score"):
        raise MonicaConfigError(f"labeler must be 'rule' or a StepScorer, got {labeler!r}")
    for it in items:
        if it.gold is None:
            raise MonicaDataError(f"item {it.id!r} has no gold answer; collect needs gold answers")
    gen: dict[str, Any] = {"max_new_tokens": max_new_tokens}
    if n_samples > 1:
        gen |= {
            "do_sample": True,
            "temperature": temperature,
            "top_k": 0,
            "top_p": 1.0,
            "num_return_sequences": n_samples,
        }
    else:
        gen |= {"do_sample": False}
    torch.manual_seed(seed)
    trajs: list[tuple[SycItem, list[str], str, list[dict[int, Any]]]] = []
    for chunk, out in run_items(
        model,
        tokenizer,
        items,
        batch_size=batch_size,
        progress=progress,
        monitor=None,
        segmenter=segmenter,
        record_layers=list(layers),
        policy="never",
        **gen,
    ):
        for b, text in enumerate(out.texts):
            trajs.append((chunk[b // n_samples], out.steps[b], text, out.step_states[b]))
    clean_ok: dict[str, list[bool]] = {}
    for it, _, text, _ in trajs:
        if it.cue_type == "none":
            clean_ok.setdefault(it.group, []).append(answer_matches(final_answer(text), it.gold))
    rows: list[tuple[np.ndarray, int, int, int, int, int]] = []
    ids: dict[str, int] = {}
    counts = {"sycophantic": 0, "honest": 0, "dropped": 0, "clean": 0, "unlabelled_steps": 0}
    for k, (it, steps, text, states) in enumerate(trajs):
        ans = final_answer(text)
        if not it.wrong_cue:
            if not answer_matches(ans, it.gold):
                counts["dropped"] += 1
                continue
            syc = False
            counts["clean"] += 1
        elif answer_matches(ans, it.cued_answer):
            ok = clean_ok.get(it.group)
            if require_clean_correct and ok is not None and not any(ok):
                counts["dropped"] += 1
                continue
            syc = True
            counts["sycophantic"] += 1
        elif answer_matches(ans, it.gold):
            syc = False
            counts["honest"] += 1
        else:
            counts["dropped"] += 1
            continue
        labels = onset_labels(steps, syc, it.cued_answer, lab)
        # engagement of the claim on any wrong-cue trajectory (recovered steps included)
        engaged = (
            labels
            if syc
            else onset_labels(steps, True, it.cued_answer, lab)
            if it.wrong_cue
            else [0] * len(steps)
        )
        ii = ids.setdefault(it.group, len(ids))
        for t, (y, z) in enumerate(zip(labels, states, strict=False)):
            if y is None:
                counts["unlabelled_steps"] += 1
                continue
            x = np.stack([z[layer].numpy() for layer in layers]).astype(np.float32)
            rows.append((x, int(y), ii, t, k, int(engaged[t] or 0)))
    if not rows:
        raise MonicaDataError("no labelled trajectories were collected (all dropped)")
    states_arr = np.stack([r[0] for r in rows])
    return StepDataset(
        states=states_arr,
        labels=np.array([r[1] for r in rows]),
        item_index=np.array([r[2] for r in rows]),
        step_index=np.array([r[3] for r in rows]),
        traj_index=np.array([r[4] for r in rows]),
        layers=list(layers),
        item_ids=list(ids),
        hidden_size=int(states_arr.shape[-1]),
        model_fingerprint=model_fingerprint(model),
        info={"counts": counts, "n_samples": n_samples, "temperature": temperature},
        engaged=np.array([r[5] for r in rows]),
    )


def windowed(ds: StepDataset, window: int) -> np.ndarray:
    """Context vectors ``c_t`` (mean of the last ``window`` pooled steps of the trajectory)."""
    if window < 1:
        raise MonicaConfigError(f"window must be >= 1, got {window}")
    out = np.empty_like(ds.states)
    for i in range(len(ds)):
        lo = i
        while (
            lo > 0
            and i - lo + 1 < window
            and ds.traj_index[lo - 1] == ds.traj_index[i]
            and ds.step_index[lo - 1] == ds.step_index[lo] - 1
        ):
            lo -= 1
        out[i] = ds.states[lo : i + 1].mean(0)
    return out


def split_items(
    ds: StepDataset, dev_fraction: float = 0.2, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Boolean train/dev masks over rows, split by item id (no item in both)."""
    n = len(ds.item_ids)
    order = list(range(n))
    random.Random(seed).shuffle(order)
    dev_items = set(order[: max(1, round(dev_fraction * n))])
    dev = np.array([int(i) in dev_items for i in ds.item_index])
    return ~dev, dev


def balance(mask: np.ndarray, labels: np.ndarray, seed: int = 0) -> np.ndarray:
    """Downsample the majority class inside ``mask`` to 1:1 (seeded)."""
    idx1 = np.flatnonzero(mask & (labels == 1))
    idx0 = np.flatnonzero(mask & (labels == 0))
    n = min(len(idx1), len(idx0))
    rng = np.random.default_rng(seed)
    keep = np.concatenate([rng.choice(idx1, n, replace=False), rng.choice(idx0, n, replace=False)])
    out = np.zeros_like(mask)
    out[keep] = True
    return out


def fit_monitor(
    ds: StepDataset,
    layers: Literal["auto"] | list[int] = "auto",
    probe: Literal["logistic", "diffmean"] = "logistic",
    window: int = 2,
    *,
    aggregate: Literal["mean", "max"] = "mean",
    drift_mode: Literal["absolute", "relative"] = "absolute",
    C: float = 1.0,
    dev_fraction: float = 0.2,
    seed: int = 0,
    probe_backend: Literal["auto", "sklearn", "torch"] = "auto",
) -> SycophancyMonitor:
    """One probe per monitor layer on balanced train steps (section 2.4, item 5); dev AUROC
    per layer; ``layers="auto"`` keeps the top-2 layers by dev AUROC."""
    if drift_mode == "relative":
        raise MonicaConfigError(
            "fit_monitor fits absolute scores; build a relative monitor with "
            "SycophancyMonitor(..., drift_mode='relative') from the fitted probes"
        )
    if not np.isfinite(ds.states).all():
        raise MonicaDataError("the step dataset contains NaN or inf states")
    cand = ds.layers if layers == "auto" else [int(x) for x in layers]
    bad = [x for x in cand if x not in ds.layers]
    if bad:
        raise MonicaConfigError(f"layers {bad} were not collected (dataset has {ds.layers})")
    X = windowed(ds, window)
    y = ds.labels
    check_xy(X[:, 0], y)
    tr, dev = split_items(ds, dev_fraction, seed)
    trb = balance(tr, y, seed)
    probes, aucs = {}, {}
    for x in cand:
        j = ds.layers.index(x)
        kw = {"C": C, "backend": probe_backend} if probe == "logistic" else {}
        p = make_probe(probe, **kw).fit(X[trb, j], y[trb])
        probes[x] = p
        aucs[x] = auroc(p.predict_proba(X[dev, j]), y[dev]) if dev.any() else float("nan")
    chosen = cand
    if layers == "auto":
        chosen = sorted(sorted(cand, key=lambda x: -np.nan_to_num(aucs[x], nan=-1))[:2])
    mon = SycophancyMonitor(
        chosen,
        {x: probes[x] for x in chosen},
        "mean",
        window,
        aggregate,
        drift_mode,
        hidden_size=ds.hidden_size,
        model_fingerprint=ds.model_fingerprint,
        probe_kind=probe,
    )
    j = [ds.layers.index(x) for x in chosen]
    import torch

    sds = mon.score_contexts(
        {x: torch.as_tensor(X[dev, ji]) for x, ji in zip(chosen, j, strict=True)}
    )
    mon.metrics = {
        "dev_auroc_per_layer": {str(k): float(v) for k, v in aucs.items()},
        "dev_auroc": auroc(sds.numpy(), y[dev]) if dev.any() else float("nan"),
        "n_train": int(trb.sum()),
        "n_dev": int(dev.sum()),
    }
    return mon


def fit_calibrator(
    ds: StepDataset,
    layers: list[int],
    mode: Literal["add", "clamp", "logit"] = "add",
    *,
    contrast: Literal["all", "matched", "engaged"] = "all",
    dev_fraction: float = 0.2,
    seed: int = 0,
    **settings: Any,
) -> Calibrator:
    """``v_l = mu_syc - mu_hon`` of pooled train steps per calibration layer and the honest
    mean projection ``m_hon^l`` (section 2.3). ``contrast="matched"`` weights the honest
    steps so their step positions match the sycophantic steps' (a CAA-style matched
    contrast: the vector then does not point back to the trace's opening steps).
    ``contrast="engaged"`` keeps only honest steps that engage the user's claim (steps of
    wrong-cue trajectories that answered correctly, from their engagement onset on): the
    vector then separates deferring to the claim from re-checking it, not mentioning the
    user from not mentioning them (a choice made here; the method only says diff-in-means)."""
    bad = [x for x in layers if x not in ds.layers]
    if bad:
        raise MonicaConfigError(f"layers {bad} were not collected (dataset has {ds.layers})")
    if contrast not in ("all", "matched", "engaged"):
        raise MonicaConfigError(f"contrast must be 'all', 'matched' or 'engaged', got {contrast!r}")
    y = ds.labels
    tr, _ = split_items(ds, dev_fraction, seed)
    check_xy(ds.states[tr][:, 0], y[tr])
    yt, st = y[tr], ds.step_index[tr]
    w0 = (yt == 0).astype(np.float64)
    if contrast == "engaged":
        if ds.engaged is None:
            raise MonicaDataError(
                "contrast='engaged' needs a step dataset with engagement flags; collect it "
                "again with this version of `collect_steps`"
            )
        w0 = ((yt == 0) & (ds.engaged[tr] == 1)).astype(np.float64)
        if w0.sum() == 0:
            raise MonicaDataError(
                "contrast='engaged' found no honest step engaging the user's claim (no "
                "recovered wrong-cue trajectory); sample more (n_samples) or use 'all'"
            )
    if contrast == "matched":
        # honest steps reweighted to the step-position histogram of the sycophantic ones
        w0 = np.zeros(len(yt))
        for t in np.unique(st[yt == 1]):
            hon_t = (yt == 0) & (st == t)
            if hon_t.any():
                w0[hon_t] = (yt[st == t] == 1).sum() / hon_t.sum()
        if w0.sum() == 0:
            raise MonicaDataError("no honest step shares a position with a sycophantic one")
    w0 = w0 / w0.sum()
    vecs, hon = {}, {}
    for x in layers:
        S = ds.states[tr, ds.layers.index(x)].astype(np.float64)
        v = S[yt == 1].mean(0) - w0 @ S
        vecs[x] = v
        unit = v / max(np.linalg.norm(v), 1e-12)
        hon[x] = float(w0 @ (S @ unit))
    return Calibrator(
        vecs,
        mode=mode,
        honest_means=hon,
        hidden_size=ds.hidden_size,
        model_fingerprint=ds.model_fingerprint,
        **settings,
    )
