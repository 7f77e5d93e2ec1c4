"""Trigger synthesis (method section 2.5): ordinary inputs whose processing reproduces the
suppression of an essential supernode, searched with GCG or exact coordinate descent, and the
signature they make up."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from circuitprint.circuits import Supernode
from circuitprint.config import TriggerConfig
from circuitprint.errors import SignatureError
from circuitprint.nodes import GatedModel, NodeSpec
from circuitprint.probes import ProbeSet, answer_token, encode, token_text

log = logging.getLogger(__name__)
SIGNATURE_VERSION = 1


@dataclass
class Signature:
    """The secret fingerprint: accepted triggers with the protected model's identity."""

    triggers: list[dict[str, Any]]
    protected_model: dict[str, Any]
    tokenizer: dict[str, Any]
    config: dict[str, Any]
    chat_template: bool = False
    stats: dict[str, Any] = field(default_factory=dict)
    version: int = SIGNATURE_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def save(self, path: str | Path) -> None:
        from llmcore.data import atomic_write_json

        atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> Signature:
        try:
            d = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise SignatureError(f"cannot read signature {path}: {e}") from e
        if d.get("version") != SIGNATURE_VERSION or "triggers" not in d:
            raise SignatureError(f"{path} is not a circuitprint signature (version 1)")
        return cls(**d)


def vocab_hash(tokenizer: Any) -> str:
    items = sorted(tokenizer.get_vocab().items())
    return hashlib.sha256(json.dumps(items).encode()).hexdigest()[:16]


def _n_auto(tokenizer: Any) -> int:
    return len(encode(tokenizer, ""))


def ids_to_text(tokenizer: Any, ids: Sequence[int]) -> str:
    """Prompt text of ``ids`` (without the special tokens the tokenizer adds by itself)."""
    return tokenizer.decode(list(ids)[_n_auto(tokenizer) :], skip_special_tokens=False)


def allowed_vocab(tokenizer: Any, probes: ProbeSet, y: str, y2: str, cfg: TriggerConfig,
                  answer_ids: set[int]) -> list[int]:  # fmt: skip
    """V_E: no special, answer-set or subject tokens, nothing containing y or y', printable."""
    special = set(tokenizer.all_special_ids)
    subj = {encode(tokenizer, it.prompt)[it.roles["subject"]] for it in probes}
    if cfg.vocab is not None:
        cand = tokenizer.convert_tokens_to_ids(list(cfg.vocab))
    else:
        cand = range(len(tokenizer))
    out = []
    for t in cand:
        if t in special or t in answer_ids or t in subj:
            continue
        s = tokenizer.decode([t])
        low = s.lower()
        if not s.strip() or not s.isprintable() or y.lower() in low or y2.lower() in low:
            continue
        out.append(int(t))
    return out


class _Search:
    """J(x') = KL(q || p(.|x')) + lambda_s max(0, a_S(x')/a_S(x) - rho) + lambda_f NLL_E."""

    def __init__(self, gm: GatedModel, sn: Supernode, q: torch.Tensor, a0: float,
                 cfg: TriggerConfig, edit_pos: list[int], roles: dict[str, int]) -> None:  # fmt: skip
        self.gm, self.sn, self.q, self.a0, self.cfg = gm, sn, q, a0, cfg
        self.edit_pos, self.roles = edit_pos, roles
        self.logq = q.clamp(min=1e-30).log()

    def score(self, ids: torch.Tensor, *, grad_embeds: torch.Tensor | None = None):
        model = self.gm.model
        need = self.cfg.rho is not None and self.cfg.lambda_s > 0
        if grad_embeds is not None:
            self.gm._cache, self.gm._acts = need, {}
            try:
                logits = model(inputs_embeds=grad_embeds).logits
                acts = dict(self.gm._acts)
            finally:
                self.gm._cache = False
        else:
            logits, acts = self.gm.run(ids, cache=need)
        lp = logits[:, -1].float().log_softmax(-1)
        j = (self.q * (self.logq - lp)).sum(-1)
        if need:
            pos = torch.full((ids.shape[0],), self.roles[self.sn.role])
            a = self.sn.activation(acts, pos)
            j = j + self.cfg.lambda_s * torch.relu(a / self.a0 - self.cfg.rho)
        if self.cfg.lambda_f > 0:
            full = logits.float().log_softmax(-1)
            e = torch.tensor(self.edit_pos)
            nll = -full[:, e - 1].gather(-1, ids[:, e].unsqueeze(-1)).squeeze(-1).sum(-1)
            j = j + self.cfg.lambda_f * nll
        return j, lp

    def batched(self, cands: torch.Tensor) -> torch.Tensor:
        out = []
        with torch.no_grad():
            for s in range(0, len(cands), max(self.cfg.batch, 1)):
                out.append(self.score(cands[s : s + self.cfg.batch])[0])
        return torch.cat(out)


def search_trigger(gm: GatedModel, sn: Supernode, base_ids: list[int], q: torch.Tensor,
                   a0: float, roles: dict[str, int], vocab: list[int], cfg: TriggerConfig,
                   seed: int) -> tuple[list[int], dict[str, int], float]:  # fmt: skip
    """One search: returns (x' ids, roles of x', final J). Exact coordinate descent over all
    single swaps when |V_E| |E| <= ``exhaustive_max``, else GCG (top-k gradient candidates,
    ``batch`` random single swaps scored exactly per step)."""
    g = torch.Generator().manual_seed(seed)
    V = torch.tensor(vocab)
    init = V[torch.randint(len(V), (cfg.n_edit if cfg.edit == "insert" else len(cfg.replace_slots),),
                           generator=g)].tolist()  # fmt: skip
    if cfg.edit == "insert":
        at = roles.get("subject_start", roles["subject"])
        ids = base_ids[:at] + init + base_ids[at:]
        edit_pos = list(range(at, at + len(init)))
        new_roles = {r: p + len(init) if p >= at else p for r, p in roles.items()}
    else:
        ids = list(base_ids)
        edit_pos = list(cfg.replace_slots)
        for p, t in zip(edit_pos, init, strict=True):
            ids[p] = t
        new_roles = dict(roles)
    s = _Search(gm, sn, q, a0, cfg, edit_pos, new_roles)
    cur = torch.tensor([ids])
    best = s.batched(cur)[0].item()
    exhaustive = len(vocab) * len(edit_pos) <= cfg.exhaustive_max
    emb = gm.model.get_input_embeddings().weight
    for _ in range(cfg.steps):
        if exhaustive:
            cands = []
            for p in edit_pos:
                c = cur.repeat(len(V), 1)
                c[:, p] = V
                cands.append(c[cur[0, p] != V])
            cands = torch.cat(cands)
        else:
            onehot = torch.zeros(len(ids), emb.shape[0])
            onehot[torch.arange(len(ids)), cur[0]] = 1.0
            onehot.requires_grad_(True)
            j, _ = s.score(cur, grad_embeds=(onehot @ emb.detach()).unsqueeze(0))
            (gr,) = torch.autograd.grad(j.sum(), onehot)
            gr = gr[edit_pos][:, V]
            top = (-gr).topk(min(cfg.topk, len(V)), dim=-1).indices
            pi = torch.randint(len(edit_pos), (cfg.batch,), generator=g)
            ti = top[pi, torch.randint(top.shape[1], (cfg.batch,), generator=g)]
            cands = cur.repeat(cfg.batch, 1)
            cands[torch.arange(cfg.batch), torch.tensor(edit_pos)[pi]] = V[ti]
        js = s.batched(cands)
        k = int(js.argmin())
        if js[k].item() >= best - 1e-7:
            if exhaustive:
                break
            continue
        best, cur = js[k].item(), cands[k : k + 1].clone()
    return cur[0].tolist(), new_roles, best


def _argmax(model: Any, ids: Sequence[Sequence[int]]) -> list[int]:
    with torch.no_grad():
        return model(input_ids=torch.tensor(ids)).logits[:, -1].argmax(-1).tolist()


def synthesize_triggers(
    model: Any,
    tokenizer: Any,
    probes: ProbeSet,
    supernodes: Sequence[Supernode],
    cfg: TriggerConfig | None = None,
    *,
    node_spec: NodeSpec | None = None,
    reference_models: Sequence[Any] = (),
    model_name: str = "",
    revision: str | None = None,
) -> Signature:
    """Search triggers for every essential supernode and family prompt and build the
    signature (section 2.5). Acceptance: argmax p(.|x') = y' (an answer-set token other than
    y); a_S(x') <= rho a_S(x) (unless rho is None); the text round-trip reproduces the ids;
    y' differs from the answer with the subject masked; fewer than ``reference_max`` of the
    reference models answer y'. Raises :class:`SignatureError` with the acceptance statistics
    when fewer than ``min_triggers`` triggers or ``min_supernodes`` supernodes survive."""
    from llmcore.zoo import weights_digest

    cfg = cfg or TriggerConfig()
    if not supernodes:
        raise SignatureError("no essential supernode: nothing to build triggers from")
    answers = cfg.answer_set or tuple(sorted({it.answer for it in probes}))
    answer_ids = {answer_token(tokenizer, a) for a in answers}
    mask_id = (
        tokenizer.convert_tokens_to_ids(cfg.placeholder)
        if cfg.placeholder
        else tokenizer.unk_token_id
    )
    stats = {k: 0 for k in ("searches", "no_shift", "reached", "rho", "roundtrip",
                            "generic", "reference", "accepted")}  # fmt: skip
    accepted: dict[str, list[dict[str, Any]]] = {}
    t0 = time.perf_counter()
    model.eval()
    with GatedModel(model, node_spec) as gm:
        for sn in supernodes:
            idx = [i for i, it in enumerate(probes) if it.family == sn.family][: cfg.max_prompts]
            for i in idx:
                it = probes[i]
                base_ids = encode(tokenizer, it.prompt)
                y = answer_token(tokenizer, it.answer)
                x = torch.tensor([base_ids])
                pos0 = torch.tensor([it.roles[sn.role]])
                with torch.no_grad(), gm.rules(sn.rules(pos0, cfg.suppress_mode)):
                    q = model(input_ids=x).logits[0, -1].float().softmax(-1)
                with torch.no_grad():
                    logits, acts = gm.run(x)
                a0 = float(sn.activation(acts, pos0)[0])
                p_clean = logits[0, -1].float().log_softmax(-1)
                y2 = int(q.argmax())
                if y2 == y or y2 not in answer_ids:
                    stats["no_shift"] += 1
                    continue
                vocab = allowed_vocab(tokenizer, probes, it.answer, token_text(tokenizer, y2),
                                      cfg, answer_ids)  # fmt: skip
                for r in range(cfg.restarts):
                    stats["searches"] += 1
                    seed = cfg.seed * 1_000_003 + 7919 * i + 31 * r + len(accepted)
                    ids2, roles2, _j = search_trigger(gm, sn, base_ids, q, a0, dict(it.roles),
                                                      vocab, cfg, seed)  # fmt: skip
                    with torch.no_grad():
                        lg, acts2 = gm.run(torch.tensor([ids2]))
                    lp2 = lg[0, -1].float().log_softmax(-1)
                    if int(lp2.argmax()) != y2:
                        continue
                    stats["reached"] += 1
                    if cfg.rho is not None:
                        a2 = float(sn.activation(acts2, torch.tensor([roles2[sn.role]]))[0])
                        if not a2 <= cfg.rho * a0:
                            stats["rho"] += 1
                            continue
                    text2 = ids_to_text(tokenizer, ids2)
                    if encode(tokenizer, text2) != ids2:
                        stats["roundtrip"] += 1
                        continue
                    masked = list(ids2)
                    masked[roles2["subject"]] = mask_id
                    if _argmax(model, [masked])[0] == y2:
                        stats["generic"] += 1
                        continue
                    if reference_models:
                        hits = sum(_argmax(m, [ids2])[0] == y2 for m in reference_models)
                        if hits >= cfg.reference_max * len(reference_models):
                            stats["reference"] += 1
                            continue
                    stats["accepted"] += 1
                    accepted.setdefault(sn.id, []).append({
                        "prompt": it.prompt,
                        "answer": it.answer,
                        "trigger_prompt": text2,
                        "trigger_ids": ids2,
                        "shifted_answer": token_text(tokenizer, y2),
                        "supernode": sn.id,
                        "family": sn.family,
                        "protected_logprobs": {
                            "clean": float(p_clean[y2]),
                            "trigger": float(lp2[y2]),
                            "q_top5": [[token_text(tokenizer, t), float(v)]
                                       for v, t in zip(*q.topk(5), strict=True)],
                        },
                    })  # fmt: skip
                    break  # one trigger per (supernode, prompt)
    stats["seconds"] = time.perf_counter() - t0
    chosen = select_triggers(accepted, cfg)
    stats["supernodes_with_triggers"] = len(accepted)
    n_sn = len({t["supernode"] for t in chosen})
    if len(chosen) < cfg.min_triggers or n_sn < cfg.min_supernodes:
        raise SignatureError(
            f"only {len(chosen)} trigger(s) from {n_sn} supernode(s) pass the rules "
            f"(need >= {cfg.min_triggers} from >= {cfg.min_supernodes}, <= "
            f"{cfg.max_share:.0%} each); acceptance statistics: {stats}, per supernode: "
            f"{ {k: len(v) for k, v in accepted.items()} }. Search more prompts or restarts"
        )
    for k, t in enumerate(chosen):
        t["id"] = k
    return Signature(
        triggers=chosen,
        protected_model={
            "name": model_name,
            "revision": revision,
            "sha256": weights_digest(model),
        },
        tokenizer={
            "name": getattr(tokenizer, "name_or_path", ""),
            "vocab_hash": vocab_hash(tokenizer),
        },
        config=asdict(cfg),
        stats=stats,
    )


def select_triggers(accepted: dict[str, list[dict[str, Any]]], cfg: TriggerConfig) -> list[dict]:
    """Round-robin over supernodes up to ``n_triggers``, then cap every supernode at
    ``max_share`` of the total (dropping its surplus)."""
    pools = {k: list(v) for k, v in sorted(accepted.items())}
    chosen: list[dict] = []
    while len(chosen) < cfg.n_triggers and any(pools.values()):
        for k in list(pools):
            if pools[k] and len(chosen) < cfg.n_triggers:
                chosen.append(pools[k].pop(0))
    while chosen:
        cap = max(1, int(cfg.max_share * len(chosen) + 1e-9))
        counts: dict[str, int] = {}
        kept = []
        for t in chosen:
            counts[t["supernode"]] = counts.get(t["supernode"], 0) + 1
            if counts[t["supernode"]] <= cap:
                kept.append(t)
        if len(kept) == len(chosen):
            break
        chosen = kept
    return chosen
