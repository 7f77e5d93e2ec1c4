"""The CPU validation protocol on the world model: editor settings for the 4 x 128 Llama, seeded
sequential edit sessions (Rel/Gen/Loc/Port, reasoning accuracy, collapse diagnostics at each T),
cached in the zoo by the code of the editors and the session plus the whole configuration."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from edit_collapse.config import EditConfig

TINY_LAMBDA = 500.0
"""MEMIT's ``mom2_update_weight`` for d_ff = 512. EasyEdit's 15000 is set for d_ff = 14336; the
share of the residual a single edit realises scales with ``d_ff / lambda``, so it is scaled down
by about the ratio of the widths."""
TINY_NULLSPACE = 2e-2
"""AlphaEdit's ``nullspace_threshold`` for the world model: EasyEdit's Llama-3-8B value, kept. On
the world model it leaves a real null space: 335 of 512 eigenvectors of ``C_0`` at layer 1 and
252 at layer 2 (median eigenvalue 6.4e-3 and 2.1e-2)."""
TINY_L2 = 10.0 * 512 / 14336
"""AlphaEdit's ridge ``L2`` for d_ff = 512 (about 0.36): EasyEdit's 10 scaled by the widths as
MEMIT's lambda is. A single edit realises ``|P k|^2 / (|P k|^2 + L2)`` of its residual; here
``|P k|^2`` of an edit key is only 3-4 (of ``|k|^2`` 36-45 at layer 1 and 340-810 at layer 2), so
``L2 = 10`` realises about 44 % of z* - z and no edit lands."""
TINY_ALPHA_V_LR = 5e-1
"""AlphaEdit's ``v_lr`` on the world model (EasyEdit: 0.1; MEMIT's 0.5 here). Adam moves each
coordinate of delta by at most ``v_lr`` per step, so 25 steps at 0.1 move z by at most about
0.1 x 25 x sqrt(128) = 28, against the 88 that reaching the new target takes on this model,
whose hidden states are about 11 per coordinate (||z|| about 127): with 0.1 v* never reaches
the target and AlphaEdit (or MEMIT given the same z*) realises no edit."""


def tiny_config(alg: str) -> EditConfig:
    """Editor settings for the world model: ROME layer 1, MEMIT/AlphaEdit layers [1, 2], v* loss at
    the last layer, 25 v* steps, statistics from 2,000 texts; FT-M on layer 2, lr 5e-4, 25 steps;
    MEMIT's lambda, AlphaEdit's ``L2`` and ``v_lr`` rescaled to this model (constants above)."""
    common: dict[str, Any] = dict(v_loss_layer=3, v_num_grad_steps=25, mom2_n_samples=2000, fact_token="last",
                                  context_template_length_params=[[5, 3]])  # fmt: skip
    if alg in ("FT", "FT-M"):
        return EditConfig(alg_name="FT", layers=[2], lr=5e-4, num_steps=25, **common)
    if alg == "FT-L":
        return EditConfig(
            alg_name="FT",
            layers=[2],
            lr=5e-4,
            num_steps=25,
            objective_optimization="prompt_last",
            **common,
        )
    if alg == "ROME":
        return EditConfig(alg_name="ROME", layers=[1], **common)
    if alg == "MEMIT":
        return EditConfig(alg_name="MEMIT", layers=[1, 2], clamp_norm_factor=0.75,
                          mom2_update_weight=TINY_LAMBDA, **common)  # fmt: skip
    if alg == "AlphaEdit":
        return EditConfig(alg_name="AlphaEdit", layers=[1, 2], clamp_norm_factor=0.75, v_lr=TINY_ALPHA_V_LR,
                          v_weight_decay=0.5, nullspace_threshold=TINY_NULLSPACE, L2=TINY_L2, **common)  # fmt: skip
    raise ValueError(alg)


ALG_OF = {
    "ft-m": "FT-M",
    "ft-l": "FT-L",
    "rome": "ROME",
    "memit": "MEMIT",
    "alphaedit": "AlphaEdit",
}


def world_editor(method: str, world: Any, encoder: str = "bm25", encoder_name: str | None = None,
                 min_score: float | None = None) -> Any:  # fmt: skip
    """An editor for the world model (statistics from the world's fact sentences and reasoning
    prompts; the retrieval baseline with the world's prompt formats and BM25, or ``encoder``
    with ``encoder_name``, e.g. ``embed`` and a local sentence-transformers folder, and its
    cosine floor ``min_score``)."""
    from edit_collapse import world as W
    from edit_collapse.factory import make_editor
    from edit_collapse.retrieval import world_format

    if method == "retrieval":
        kw: dict[str, Any] = {"encoder_name": encoder_name} if encoder_name else {}
        if min_score is not None:
            kw["min_score"] = min_score
        return make_editor("retrieval", encoder=encoder, fmt=world_format(), **kw)
    import random

    cfg = tiny_config(ALG_OF[method])
    docs = list(dict.fromkeys(W.training_documents(world, seed=world.seed)))
    random.Random(1).shuffle(docs)
    return make_editor(method, cfg, stats_texts=docs[: cfg.mom2_n_samples])


def run_world_session(method: str, entry: Any, world: Any, seed: int = 0, n_edits: int = 50,
                      eval_at: tuple[Any, ...] = (1, 10, 50), geometry: bool = True, encoder: str = "bm25",
                      encoder_name: str | None = None, min_score: float | None = None) -> dict[str, Any]:  # fmt: skip
    """One sequential session on a fresh copy of the world model (``encoder``/``encoder_name``/
    ``min_score``: the retrieval baseline's encoder, see :func:`world_editor`); ``editor`` in the result is
    the editor after the session (its memory holds the ``n_edits`` facts)."""
    import torch

    from edit_collapse import world as W
    from edit_collapse.requests import world_requests
    from edit_collapse.session import run_edit_session

    torch.manual_seed(seed)
    model, tok = entry.load()
    reqs = world_requests(world, n_edits, seed=seed)
    _, held = W.reasoning_problems(world.seed)
    probe = [p for p, _ in held] + [f.prompt(0) for f in world.facts]
    ed = world_editor(method, world, encoder, encoder_name, min_score)
    res = run_edit_session(
        ed, model, tok, reqs, eval_at=eval_at, reasoning=held, probe=probe if geometry else (),
        geometry_layers=list(range(model.config.num_hidden_layers)) if geometry else (), dataset="world",
    )  # fmt: skip
    return {
        "rows": res.rows,
        "geometry": res.geometry,
        "delta_bytes": res.handle.delta_bytes() if res.handle else 0,
        "editor": ed,
    }


def session_entry(method: str, seed: int = 0, n_edits: int = 50, eval_at: tuple[Any, ...] = (1, 10, 50),
                  world_entry: Any = None, n_entities: int | None = None, n_relations: int | None = None,
                  progress: bool = False) -> Any:  # fmt: skip
    """The cached result (``session.json``) of :func:`run_world_session`, keyed by the world
    model's key, the editor configuration and the code of editors, session and metrics."""
    from edit_collapse import (
        core,
        editors,
        experiments,
        geometry,
        metrics,
        retrieval,
        session,
        stats,
        tiny,
    )
    from edit_collapse import world as W
    from llmcore import zoo

    ne = n_entities or tiny.N_ENTITIES
    nr = n_relations or tiny.N_RELATIONS
    wentry = world_entry or tiny.build_world_model(ne, nr)
    world = W.make_world(ne, nr, 0)
    cfg = None if method == "retrieval" else asdict(tiny_config(ALG_OF[method]))
    material = {
        "world": wentry.key, "method": method, "cfg": cfg, "seed": seed, "n_edits": n_edits,
        "eval_at": [str(t) for t in eval_at],
        "code": zoo.code_digest(core, editors, session, metrics, retrieval, geometry, stats, experiments),
    }  # fmt: skip

    def make(tmp: Any) -> dict[str, Any]:
        out = run_world_session(method, wentry, world, seed, n_edits, eval_at)
        out.pop("editor")
        (tmp / "session.json").write_text(json.dumps(out, indent=1))
        last = out["rows"][-1]
        return {k: last.get(k) for k in ("rel", "gen", "loc", "port", "avg", "reasoning")}

    return zoo.cached(f"edit-collapse-session-{method}-s{seed}", material, make, progress=progress)


def load_session(entry: Any) -> dict[str, Any]:
    return json.loads((entry.path / "session.json").read_text())
