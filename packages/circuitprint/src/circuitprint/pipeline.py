"""End-to-end owner pipeline: confident probes -> attribution -> circuits -> supernodes ->
essentiality -> triggers -> signature, with a cached variant keyed by code and config."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from circuitprint.circuits import (
    Essentiality,
    Supernode,
    attribute,
    discover_circuits,
    essentiality,
    faithfulness,
    find_supernodes,
)
from circuitprint.config import DiscoverConfig
from circuitprint.errors import SignatureError
from circuitprint.probes import ProbeSet
from circuitprint.triggers import Signature, TriggerConfig, synthesize_triggers

log = logging.getLogger(__name__)


@dataclass
class Discovery:
    """What discovery found: essential supernodes first, with their statistics."""

    supernodes: list[Supernode]
    essentiality: list[Essentiality]
    probes: ProbeSet
    counts: dict[str, int] = field(default_factory=dict)
    faithfulness: float | None = None
    mean_circuit_size: float = 0.0

    @property
    def essential(self) -> list[Supernode]:
        ok = {e.supernode: e for e in self.essentiality if e.essential}
        return sorted((s for s in self.supernodes if s.id in ok), key=lambda s: -ok[s.id].score)

    def to_dict(self) -> dict[str, Any]:
        return {
            "supernodes": [s.to_dict() for s in self.supernodes],
            "essentiality": [asdict(e) for e in self.essentiality],
            "probes": [asdict(i) | {"roles": dict(i.roles)} for i in self.probes],
            "counts": self.counts,
            "faithfulness": self.faithfulness,
            "mean_circuit_size": self.mean_circuit_size,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Discovery:
        return cls(
            [Supernode.from_dict(s) for s in d["supernodes"]],
            [Essentiality(**e) for e in d["essentiality"]],
            ProbeSet(d["probes"]),
            d.get("counts", {}),
            d.get("faithfulness"),
            d.get("mean_circuit_size", 0.0),
        )


def discover(
    model: Any, tokenizer: Any, probes: ProbeSet, cfg: DiscoverConfig | None = None
) -> Discovery:
    """Filter confident probes, attribute, build circuits (faithfulness checked), find
    supernodes and test their essentiality. Raises :class:`SignatureError` when no supernode
    is essential, with the best flip rates."""
    cfg = cfg or DiscoverConfig()
    spec = cfg.node_spec()
    kept, counts = probes.filter_confident(model, tokenizer, min_p=cfg.min_p,
                                           min_per_family=cfg.min_per_family)  # fmt: skip
    if counts["kept"] < counts["total"]:
        log.info("dropped %d of %d probes (not confident or family too small)",
                 counts["total"] - counts["kept"], counts["total"])  # fmt: skip
    table = attribute(model, tokenizer, kept, spec)
    circ = discover_circuits(table, cfg.mass, cfg.k_max)
    f = faithfulness(model, tokenizer, kept, table, circ) if cfg.check_faithfulness else None
    sns = find_supernodes(table, circ, method=cfg.supernodes, sim=cfg.sim,
                          backbone_frac=cfg.backbone_frac, top_k=cfg.top_k)  # fmt: skip
    ess = essentiality(model, tokenizer, kept, sns, mode=cfg.suppress_mode, flip_min=cfg.flip_min,
                       random_max=cfg.random_max, n_random=cfg.n_random, seed=cfg.seed,
                       node_spec=spec, table=table)  # fmt: skip
    d = Discovery(sns, ess, kept, counts, f, float(sum(len(c) for c in circ.members) / len(kept)))
    if not d.essential:
        best = sorted(ess, key=lambda e: -e.flip_rate)[:5]
        raise SignatureError(
            f"no essential supernode among {len(sns)} candidates (flip >= {cfg.flip_min}, random "
            f"<= {cfg.random_max}); best flip/random rates: "
            f"{[(e.supernode, round(e.flip_rate, 2), round(e.random_flip_rate, 2)) for e in best]}."
            " Try suppress_mode='inhibit' or supernodes='topk'"
        )
    return d


def build_signature(model: Any, tokenizer: Any, probes: ProbeSet, dcfg: DiscoverConfig,
                    tcfg: TriggerConfig, *, reference_models: list[Any] | tuple = (),
                    model_name: str = "") -> tuple[Signature, Discovery]:  # fmt: skip
    """:func:`discover` then :func:`synthesize_triggers` on the essential supernodes."""
    d = discover(model, tokenizer, probes, dcfg)
    sig = synthesize_triggers(model, tokenizer, d.probes, d.essential, tcfg,
                              node_spec=dcfg.node_spec(), reference_models=reference_models,
                              model_name=model_name)  # fmt: skip
    sig.stats["discovery"] = {"counts": d.counts, "faithfulness": d.faithfulness,
                              "n_essential": len(d.essential),
                              "mean_circuit_size": d.mean_circuit_size}  # fmt: skip
    return sig, d


def cached_signature(entry: Any, probes: ProbeSet, dcfg: DiscoverConfig, tcfg: TriggerConfig,
                     *, references: list[Any] | tuple = (), name: str = "circuitprint-signature",
                     progress: bool = False) -> Signature:  # fmt: skip
    """:func:`build_signature` for a zoo model, cached by the model, references, probes,
    both configs and a digest of the discovery and trigger code."""
    import json

    from llmcore import zoo

    material = {
        "model": entry.key,
        "references": [r.key for r in references],
        "probes": [asdict(i) | {"roles": dict(i.roles)} for i in probes],
        "discover": asdict(dcfg),
        "triggers": asdict(tcfg),
        "code": zoo.code_digest(
            "circuitprint.nodes",
            "circuitprint.circuits",
            "circuitprint.triggers",
            "circuitprint.pipeline",
            "circuitprint.probes",
        ),
    }

    def make(out):
        model, tok = entry.load()
        refs = [r.load()[0] for r in references]
        sig, d = build_signature(model, tok, probes, dcfg, tcfg, reference_models=refs,
                                 model_name=entry.name)  # fmt: skip
        sig.save(out / "signature.json")
        (out / "discovery.json").write_text(json.dumps(d.to_dict()))
        return {"n_triggers": len(sig.triggers)}

    e = zoo.cached(name, material, make, progress=progress)
    return Signature.load(e.path / "signature.json")
