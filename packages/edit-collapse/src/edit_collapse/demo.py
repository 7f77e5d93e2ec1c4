"""``llmcore demo edit-collapse``: three fact edits in llmcore's built-in ``tiny-llama`` (which
learnt ``facts_corpus``) with FT-M, ROME, MEMIT, AlphaEdit and the retrieval baseline; prints
Rel, Loc and the share of worked-addition accuracy kept."""

from __future__ import annotations

import random
from typing import Any


def demo_requests(n: int = 3, seed: int = 0) -> tuple[list[Any], list[tuple[str, str]]]:
    """Edit requests on ``facts_corpus`` facts and worked additions of the arithmetic corpus."""
    from edit_collapse.requests import EditRequest
    from llmcore.zoo import arithmetic_corpus, facts_corpus

    _, table = facts_corpus(seed=0)
    rng = random.Random(seed)
    ents = sorted(table)
    chosen = rng.sample(ents, n + 4)
    reqs = []
    for i, e in enumerate(chosen[:n]):
        rel = "capital"
        new = table[chosen[n + i]][rel]
        others = [
            (f"The {r} of {x} is", table[x][r]) for x in chosen[n:] for r in ("river", "color")
        ]
        reqs.append(EditRequest(prompt=f"The {rel} of {e} is", subject=e, target_new=new,
                                ground_truth=table[e][rel], rephrase=[], case_id=i,
                                locality={"neighborhood": others[:4]}))  # fmt: skip
    arith = [d.split(": ", 1) for d in arithmetic_corpus(seed=0).eval[:32]]
    return reqs, [(a + ":", b) for a, b in arith]


def run() -> dict[str, Any]:
    """Edit tiny-llama with each method; one row of results per method, flattened."""
    import torch

    from edit_collapse.experiments import ALG_OF, tiny_config
    from edit_collapse.factory import make_editor
    from edit_collapse.session import run_edit_session
    from llmcore import zoo

    torch.set_num_threads(1)
    entry = zoo.build("tiny-llama", progress=False)
    model, tok = entry.load()
    reqs, arith = demo_requests()
    from llmcore.zoo import facts_corpus

    corpus, _ = facts_corpus(seed=0)
    texts = list(dict.fromkeys(corpus.train))[:400]
    out: dict[str, Any] = {}
    for m in ("ft-m", "rome", "memit", "alphaedit", "retrieval"):
        if m == "retrieval":
            ed = make_editor("retrieval", encoder="bm25", gate="none")
        else:
            cfg = tiny_config(ALG_OF[m])
            ed = make_editor(m, cfg, stats_texts=texts)
        res = run_edit_session(ed, model, tok, reqs, eval_at=(len(reqs),), reasoning=arith)
        row = res.rows[-1]
        out[f"{m}_rel"] = round(row["rel"], 3)
        out[f"{m}_loc"] = round(row["loc"], 3)
        out[f"{m}_arith_kept"] = (
            round(row["retention"], 3) if row.get("retention") is not None else None
        )
        if res.handle is not None:
            res.handle.restore()
    return out


if __name__ == "__main__":  # pragma: no cover
    for k, v in run().items():
        print(f"{k:24s} {v}")
