"""Circuit discovery by attribution patching, supernodes and their essentiality
(method sections 2.3 and 2.4)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from circuitprint.errors import SignatureError
from circuitprint.nodes import GatedModel, GateRule, NodeSpec
from circuitprint.probes import ProbeSet, answer_token, encode

log = logging.getLogger(__name__)
SuppressMode = Literal["zero", "mean", "inhibit"]


def batch_ids(
    tokenizer: Any, prompts: Sequence[str]
) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """Right-padded ids, attention mask and lengths (positions stay 0..len-1)."""
    rows = [encode(tokenizer, p) for p in prompts]
    T = max(len(r) for r in rows)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids = torch.full((len(rows), T), pad, dtype=torch.long)
    att = torch.zeros((len(rows), T), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        att[i, : len(r)] = 1
    return ids, att, [len(r) for r in rows]


def last_logits(logits: torch.Tensor, lengths: Sequence[int]) -> torch.Tensor:
    return logits[torch.arange(len(lengths)), torch.tensor(lengths) - 1].float()


@dataclass
class AttributionTable:
    """Attribution scores A_v(x) (prompts x nodes) with everything later stages need.

    ``nodes[j] = (role, layer, unit)``; ``dev[i, j] = o_v(x_i) - mean`` (heads: projected on the
    node's mean-gradient direction ``dirs``); ``means[(role, layer)]`` the mean activations."""

    nodes: list[tuple[str, int, int]]
    scores: np.ndarray
    dev: np.ndarray
    metric: np.ndarray
    families: list[str]
    answers: list[int]
    runner_up: list[int]
    means: dict[tuple[str, int], torch.Tensor]
    dirs: dict[tuple[str, int], torch.Tensor] | None
    node_spec: NodeSpec
    roles: list[str]

    def index(self) -> dict[tuple[str, int, int], int]:
        return {n: j for j, n in enumerate(self.nodes)}


def _role_pos(probes: ProbeSet, idx: Sequence[int], role: str) -> torch.Tensor:
    return torch.tensor([probes[i].roles[role] for i in idx])


def attribute(
    model: Any,
    tokenizer: Any,
    probes: ProbeSet,
    node_spec: NodeSpec | None = None,
    *,
    metric: Literal["logit_diff"] = "logit_diff",
    baseline: Literal["mean"] = "mean",
    batch_size: int = 64,
) -> AttributionTable:
    """Attribution patching (section 2.3): m(x) = log p(y|x) - log p(y_c|x) with y_c the
    runner-up; one forward + one backward per batch give A_v(x) = <o_v(x) - mean_v, dm/do_v>
    for every node at every role position, the first-order estimate of m(x) - m(x with v
    mean-ablated). The mean is over the probe prompts at the same role position."""
    from llmcore.hooks import capture_activations

    spec = node_spec or NodeSpec()
    if metric != "logit_diff" or baseline != "mean":
        raise SignatureError(f"metric {metric!r}/baseline {baseline!r}: use logit_diff/mean")
    roles = sorted(probes[0].roles)
    gm = GatedModel(model, spec)
    P = len(probes)
    answers = [answer_token(tokenizer, it.answer) for it in probes]
    acts_all: dict[tuple[str, int], list[torch.Tensor]] = {}
    grads_all: dict[tuple[str, int], list[torch.Tensor]] = {}
    metric_all, runner = [], []
    for s in range(0, P, batch_size):
        idx = list(range(s, min(P, s + batch_size)))
        ids, att, lens = batch_ids(tokenizer, [probes[i].prompt for i in idx])
        if spec.basis == "transcoder":
            with gm:
                logits, acts = gm.run(ids, att)
        else:
            names = [gm.names[layer] for layer in gm.layers]
            with capture_activations(model, names, input=True, detach=False) as cap:
                logits = model(input_ids=ids, attention_mask=att).logits
            acts = {}
            for layer in gm.layers:
                x = cap[gm.names[layer]][0]
                acts[layer] = x.view(*x.shape[:-1], gm.n_heads, -1) if spec.basis == "head" else x
        lp = last_logits(logits, lens).log_softmax(-1)
        y = torch.tensor([answers[i] for i in idx])
        masked = lp.detach().clone()
        masked[torch.arange(len(idx)), y] = -float("inf")
        yc = masked.argmax(-1)
        rows = torch.arange(len(idx))
        m = lp[rows, y] - lp[rows, yc]
        grads = torch.autograd.grad(m.sum(), [acts[layer] for layer in gm.layers])
        metric_all.append(m.detach())
        runner.extend(yc.tolist())
        for layer, a, g in zip(gm.layers, [acts[lay] for lay in gm.layers], grads, strict=True):
            for role in roles:
                pos = _role_pos(probes, idx, role)
                acts_all.setdefault((role, layer), []).append(a.detach()[rows, pos].float())
                grads_all.setdefault((role, layer), []).append(g[rows, pos].float())
    nodes, scores, devs = [], [], []
    means, dirs = {}, {} if spec.basis == "head" else None
    for role in roles:
        for layer in gm.layers:
            a = torch.cat(acts_all[(role, layer)])
            g = torch.cat(grads_all[(role, layer)])
            mu = a.mean(0)
            means[(role, layer)] = mu
            d = a - mu
            sc = (d * g).sum(-1) if spec.basis == "head" else d * g
            if dirs is not None:
                gd = g.mean(0)
                gd = gd / gd.norm(dim=-1, keepdim=True).clamp(min=1e-12)
                dirs[(role, layer)] = gd
                d = (d * gd).sum(-1)
            scores.append(sc)
            devs.append(d)
            nodes.extend((role, layer, u) for u in range(sc.shape[1]))
    return AttributionTable(
        nodes=nodes,
        scores=torch.cat(scores, 1).numpy(),
        dev=torch.cat(devs, 1).numpy(),
        metric=torch.cat(metric_all).numpy(),
        families=[it.family for it in probes],
        answers=answers,
        runner_up=runner,
        means=means,
        dirs=dirs,
        node_spec=spec,
        roles=roles,
    )


def _rules_for(table: AttributionTable, sel: Sequence[int], positions: dict[str, Any],
               gate: float, mean_base: bool) -> list[GateRule]:  # fmt: skip
    groups: dict[tuple[str, int], list[int]] = {}
    for j in sel:
        role, layer, unit = table.nodes[j]
        groups.setdefault((role, layer), []).append(unit)
    rules = []
    for (role, layer), units in groups.items():
        u = torch.tensor(units)
        base = table.means[(role, layer)][u] if mean_base else None
        rules.append(GateRule(layer, u, positions[role], gate, base))
    return rules


def metric_under(model: Any, tokenizer: Any, probes: ProbeSet, table: AttributionTable,
                 rules_per_prompt: Sequence[list[GateRule]]) -> np.ndarray:  # fmt: skip
    """m(x_i) with prompt i's gate rules applied (one prompt per forward)."""
    out = []
    with GatedModel(model, table.node_spec) as gm, torch.no_grad():
        for i, it in enumerate(probes):
            ids, att, lens = batch_ids(tokenizer, [it.prompt])
            with gm.rules(rules_per_prompt[i]):
                lp = last_logits(model(input_ids=ids, attention_mask=att).logits, lens)
            lp = lp.log_softmax(-1)[0]
            out.append((lp[table.answers[i]] - lp[table.runner_up[i]]).item())
    return np.array(out)


def activation_patching(model: Any, tokenizer: Any, probes: ProbeSet, table: AttributionTable,
                        node_idx: Sequence[int], prompt_idx: Sequence[int]) -> np.ndarray:  # fmt: skip
    """Exact effect m(x) - m(x with v mean-ablated), one forward per (node, prompt):
    the ground truth attribution patching approximates. Returns (prompts, nodes)."""
    out = np.zeros((len(prompt_idx), len(node_idx)))
    with GatedModel(model, table.node_spec) as gm, torch.no_grad():
        for a, i in enumerate(prompt_idx):
            it = probes[i]
            ids, att, lens = batch_ids(tokenizer, [it.prompt])
            pos = {r: torch.tensor([p]) for r, p in it.roles.items()}
            for b, j in enumerate(node_idx):
                with gm.rules(_rules_for(table, [j], pos, 0.0, True)):
                    lp = last_logits(model(input_ids=ids, attention_mask=att).logits, lens)
                lp = lp.log_softmax(-1)[0]
                out[a, b] = table.metric[i] - (lp[table.answers[i]] - lp[table.runner_up[i]]).item()
    return out


@dataclass
class Circuits:
    """Per-prompt circuits C(x) (node indices, by decreasing attribution)."""

    members: list[np.ndarray]
    faithfulness: float | None = None


def discover_circuits(table: AttributionTable, mass: float = 0.8, k_max: int = 64) -> Circuits:
    """C(x): nodes with A_v > 0 by decreasing A_v, the shortest prefix holding ``mass`` of
    their total, capped at ``k_max`` (section 2.3, step 3)."""
    out = []
    for row in table.scores:
        order = np.argsort(-row, kind="stable")
        pos = order[row[order] > 0]
        if len(pos) == 0:
            out.append(pos)
            continue
        c = np.cumsum(row[pos])
        k = int(np.searchsorted(c, mass * c[-1]) + 1)
        out.append(pos[: min(k, k_max)])
    return Circuits(out)


def faithfulness(model: Any, tokenizer: Any, probes: ProbeSet, table: AttributionTable,
                 circuits: Circuits, *, warn_below: float = 0.6) -> float:  # fmt: skip
    """F = (m_C - m_empty) / (m_full - m_empty), mean over prompts: everything outside C(x)
    mean-ablated, versus all nodes mean-ablated (section 2.3, step 4). Warns below 0.6."""
    n = len(table.nodes)
    rules_c, rules_0 = [], []
    for i, it in enumerate(probes):
        pos = {r: torch.tensor([p]) for r, p in it.roles.items()}
        keep = set(circuits.members[i].tolist())
        rules_c.append(_rules_for(table, [j for j in range(n) if j not in keep], pos, 0.0, True))
        rules_0.append(_rules_for(table, range(n), pos, 0.0, True))
    m_c = metric_under(model, tokenizer, probes, table, rules_c)
    m_0 = metric_under(model, tokenizer, probes, table, rules_0)
    denom = table.metric - m_0
    ok = np.abs(denom) > 1e-6
    f = float(np.mean((m_c[ok] - m_0[ok]) / denom[ok])) if ok.any() else float("nan")
    circuits.faithfulness = f
    if not f >= warn_below:
        log.warning("circuit faithfulness %.2f < %.2f: circuits miss part of the mechanism",
                    f, warn_below)  # fmt: skip
    return f


@dataclass
class Supernode:
    """A group of nodes with one role in a family's circuit (section 2.4)."""

    id: str
    family: str
    role: str
    nodes: list[tuple[int, int]]
    """(layer, unit) pairs at the role position."""
    weights: list[float]
    """w_v = mean attribution over the family."""
    means: list[Any] = field(default_factory=list)
    """Mean activation per node (a list for heads)."""
    dirs: list[Any] | None = None
    """Heads: unit direction each head's output is projected on."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"nodes": [list(n) for n in self.nodes]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Supernode:
        return cls(**(d | {"nodes": [tuple(n) for n in d["nodes"]]}))

    def rules(self, positions: Any, mode: SuppressMode) -> list[GateRule]:
        """Gate rules suppressing the supernode at ``positions`` of its role."""
        if mode not in ("zero", "mean", "inhibit"):
            raise SignatureError(f"suppress mode {mode!r}: use zero, mean or inhibit")
        by_layer: dict[int, list[int]] = {}
        for k, (layer, _u) in enumerate(self.nodes):
            by_layer.setdefault(layer, []).append(k)
        out = []
        for layer, ks in by_layer.items():
            units = torch.tensor([self.nodes[k][1] for k in ks])
            base = torch.tensor([self.means[k] for k in ks]) if mode == "mean" else None
            out.append(GateRule(layer, units, positions, -1.0 if mode == "inhibit" else 0.0, base))
        return out

    def activation(self, acts: dict[int, torch.Tensor], positions: torch.Tensor) -> torch.Tensor:
        """a_S(x) = sum_v w_v (o_v(x) - mean_v) per batch row, from ``GatedModel.run`` acts."""
        rows = torch.arange(len(positions))
        tot = torch.zeros(len(positions))
        for k, (layer, u) in enumerate(self.nodes):
            o = acts[layer][rows, positions, u].float()
            d = o - torch.as_tensor(self.means[k], dtype=torch.float32)
            if d.dim() == 2:
                d = d @ torch.as_tensor(self.dirs[k] if self.dirs else 0.0, dtype=torch.float32)
            tot += self.weights[k] * d
        return tot


def _make_supernode(table, fam, role, sel, w, k) -> Supernode:
    nodes = [(table.nodes[j][1], table.nodes[j][2]) for j in sel]
    means = [table.means[(role, la)][u].tolist() for la, u in nodes]
    dirs = [table.dirs[(role, la)][u].tolist() for la, u in nodes] if table.dirs else None
    return Supernode(f"{fam}/{role}/{k}", fam, role, nodes, [float(w[j]) for j in sel], means, dirs)


def find_supernodes(
    table: AttributionTable,
    circuits: Circuits | None = None,
    *,
    method: Literal["cluster", "topk"] = "cluster",
    sim: float = 0.7,
    backbone_frac: float = 0.5,
    top_k: int = 64,
) -> list[Supernode]:
    """Supernodes per family (section 2.4). ``cluster``: the family backbone (nodes in >=
    ``backbone_frac`` of its circuits) is clustered by average-linkage cosine similarity of the
    activation profiles, cut at ``sim``, only within one role and |layer difference| <= 1;
    clusters of >= 2 nodes and single nodes among the family's top 5 are kept. ``topk``: the
    ``top_k`` nodes of highest mean attribution per role (larger groups for tiny models, whose
    small clusters do not change answers)."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    if method not in ("cluster", "topk"):
        raise SignatureError(f"supernode method {method!r}: use cluster or topk")
    fams = sorted(set(table.families))
    out: list[Supernode] = []
    for fam in fams:
        rows = [i for i, f in enumerate(table.families) if f == fam]
        w = table.scores[rows].mean(0)
        if method == "topk":
            for role in table.roles:
                cand = [j for j, n in enumerate(table.nodes) if n[0] == role and w[j] > 0]
                cand.sort(key=lambda j: -w[j])
                if cand:
                    out.append(_make_supernode(table, fam, role, cand[:top_k], w, 0))
            continue
        if circuits is None:
            raise SignatureError("find_supernodes(method='cluster') needs the circuits")
        counts = np.zeros(len(table.nodes))
        for i in rows:
            counts[circuits.members[i]] += 1
        backbone = np.flatnonzero(counts >= backbone_frac * len(rows))
        top5 = set(backbone[np.argsort(-w[backbone])][:5].tolist())
        prof = table.dev
        for role in table.roles:
            bb = [j for j in backbone if table.nodes[j][0] == role]
            if not bb:
                continue
            if len(bb) == 1:
                groups = [bb]
            else:
                x = prof[:, bb].T
                x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
                dist = np.clip(1.0 - x @ x.T, 0.0, 2.0)
                lay = np.array([table.nodes[j][1] for j in bb])
                dist[np.abs(lay[:, None] - lay[None, :]) > 1] = 2.0
                np.fill_diagonal(dist, 0.0)
                z = linkage(squareform(dist, checks=False), method="average")
                lab = fcluster(z, t=1.0 - sim, criterion="distance")
                groups = [[bb[k] for k in np.flatnonzero(lab == c)] for c in np.unique(lab)]
            for k, g in enumerate(sorted(groups, key=lambda g: -sum(w[j] for j in g))):
                if len(g) >= 2 or g[0] in top5:
                    out.append(_make_supernode(table, fam, role, g, w, k))
    return out


@contextlib.contextmanager
def suppress(model: Any, supernode: Supernode, mode: SuppressMode = "zero", *,
             positions: Any, node_spec: NodeSpec | None = None) -> Iterator[None]:  # fmt: skip
    """Suppress ``supernode`` at ``positions`` (its role's token index per batch row, or one
    index) in every forward inside the block: ``zero`` g = 0, ``mean`` o <- mean, ``inhibit``
    g = -1 (section 2.4, step 4)."""
    with GatedModel(model, node_spec) as gm, gm.rules(supernode.rules(positions, mode)):
        yield


@dataclass
class Essentiality:
    """Outcome of suppressing one supernode on its family's prompts."""

    supernode: str
    flip_rate: float
    random_flip_rate: float
    logp_drop: float
    essential: bool
    score: float
    shifted: list[int]
    """y'_i per family prompt (argmax under suppression)."""
    prompts: list[int]
    """Indices of the family's prompts in the probe set."""


def _flip(
    model, tokenizer, probes, idx, answers, rules, node_spec
) -> tuple[np.ndarray, np.ndarray, list[int]]:
    ids, att, lens = batch_ids(tokenizer, [probes[i].prompt for i in idx])
    with GatedModel(model, node_spec) as gm, torch.no_grad(), gm.rules(rules):
        lp = last_logits(model(input_ids=ids, attention_mask=att).logits, lens).log_softmax(-1)
    y = torch.tensor([answers[i] for i in idx])
    arg = lp.argmax(-1)
    return (arg != y).numpy(), lp[torch.arange(len(idx)), y].numpy(), arg.tolist()


def essentiality(
    model: Any,
    tokenizer: Any,
    probes: ProbeSet,
    supernodes: Sequence[Supernode],
    *,
    mode: SuppressMode = "zero",
    flip_min: float = 0.6,
    random_max: float = 0.2,
    n_random: int = 10,
    seed: int = 0,
    node_spec: NodeSpec | None = None,
    table: AttributionTable | None = None,
) -> list[Essentiality]:
    """Essentiality (section 2.4, step 4): S is essential for its family if suppressing it
    flips the top-1 answer on >= ``flip_min`` of the family's prompts while random node sets
    of the same size, drawn from the same layers and role, flip <= ``random_max`` on average
    (``n_random`` draws). Score = flip rate x mean log-prob drop of the answer. ``mean`` mode
    needs ``table`` (the mean activations of the random sets)."""
    gm = GatedModel(model, node_spec)
    rng = np.random.default_rng(seed)
    answers = [answer_token(tokenizer, it.answer) for it in probes]
    ids, att, lens = batch_ids(tokenizer, [it.prompt for it in probes])
    with torch.no_grad():
        base_lp = last_logits(model(input_ids=ids, attention_mask=att).logits, lens).log_softmax(-1)
    out = []
    for sn in supernodes:
        idx = [i for i, it in enumerate(probes) if it.family == sn.family]
        if not idx:
            continue
        pos = torch.tensor([probes[i].roles[sn.role] for i in idx])
        flips, lp_y, arg = _flip(model, tokenizer, probes, idx, answers, sn.rules(pos, mode),
                                 node_spec)  # fmt: skip
        rand = []
        for _ in range(n_random):
            nodes = []
            for layer in sorted({la for la, _ in sn.nodes}):
                k = sum(1 for la, _ in sn.nodes if la == layer)
                units = rng.choice(gm.n_units(layer), size=k, replace=False)
                nodes.extend((layer, int(u)) for u in units)
            if mode == "mean":
                if table is None:
                    raise SignatureError("essentiality(mode='mean') needs the attribution table")
                means = [table.means[(sn.role, la)][u].tolist() for la, u in nodes]
            else:
                means = [0.0] * len(nodes)
            rs = Supernode("random", sn.family, sn.role, nodes, [1.0] * len(nodes), means)
            rand.append(_flip(model, tokenizer, probes, idx, answers, rs.rules(pos, mode),
                              node_spec)[0].mean())  # fmt: skip
        fr, rr = float(flips.mean()), float(np.mean(rand)) if rand else 0.0
        drop = float(np.mean(base_lp[idx, [answers[i] for i in idx]].numpy() - lp_y))
        ess = fr >= flip_min and rr <= random_max
        out.append(Essentiality(sn.id, fr, rr, drop, ess, fr * drop, arg, idx))
    return out
