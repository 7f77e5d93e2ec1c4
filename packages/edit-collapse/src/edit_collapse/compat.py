"""``EasyEditCompat(editor).edit(...)``: EasyEdit's ``BaseEditor.edit`` call shape and its
``metrics`` list, so scripts written for EasyEdit port unchanged."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from edit_collapse.errors import EditInputError
from edit_collapse.requests import EditRequest


def _block(
    block: dict[str, Any] | None, n: int, what: str
) -> list[dict[str, list[tuple[str, str]]]]:
    out: list[dict[str, list[tuple[str, str]]]] = [{} for _ in range(n)]
    for key, v in (block or {}).items():
        ps, gs = v.get("prompt"), v.get("ground_truth")
        ps = [ps] if isinstance(ps, str) else list(ps or [])
        gs = [gs] if isinstance(gs, str) else list(gs or [])
        if len(ps) != n or len(gs) != n:
            raise EditInputError(
                f"{what}[{key!r}] has {len(ps)} prompts and {len(gs)} ground truths for {n} edits"
            )
        for i, (p, g) in enumerate(zip(ps, gs, strict=True)):
            pp = [p] if isinstance(p, str) else list(p)
            gg = [g] * len(pp) if isinstance(g, str) else list(g)
            out[i][key] = list(zip(pp, gg, strict=True))
    return out


class EasyEditCompat:
    """Wraps an editor, a model and a tokenizer behind EasyEdit's ``edit`` signature."""

    def __init__(self, editor: Any, model: Any, tok: Any) -> None:
        self.editor, self.model, self.tok = editor, model, tok

    def edit(self, prompts: Sequence[str], target_new: Sequence[str], subject: Sequence[str],
             ground_truth: Sequence[str] | None = None, rephrase_prompts: Sequence[str] | None = None,
             locality_inputs: dict[str, Any] | None = None, portability_inputs: dict[str, Any] | None = None,
             sequential_edit: bool = False, **_: Any) -> tuple[list[dict[str, Any]], Any, Any]:  # fmt: skip
        """Returns ``(metrics, edited_model, handle)``; ``metrics[i]`` has ``case_id``,
        ``requested_rewrite``, ``time``, ``pre`` and ``post`` with ``rewrite_acc``,
        ``rephrase_acc``, ``locality`` and ``portability`` (EasyEdit's keys). Sequential mode
        evaluates after all edits; independent mode restores the weights after each edit."""
        from edit_collapse.session import Evaluator

        n = len(prompts)
        lens = {"prompts": n, "target_new": len(target_new), "subject": len(subject)}
        if ground_truth is not None:
            lens["ground_truth"] = len(ground_truth)
        if rephrase_prompts is not None:
            lens["rephrase_prompts"] = len(rephrase_prompts)
        if len(set(lens.values())) != 1:
            raise EditInputError(f"EasyEdit-style inputs differ in length: {lens}")
        locs = _block(locality_inputs, n, "locality_inputs")
        ports = _block(portability_inputs, n, "portability_inputs")
        reqs = [
            EditRequest(
                prompt=prompts[i],
                subject=subject[i],
                target_new=target_new[i],
                ground_truth=ground_truth[i] if ground_truth else None,
                rephrase=[rephrase_prompts[i]] if rephrase_prompts else [],
                locality=locs[i],
                portability=ports[i],
                case_id=i,
            )
            for i in range(n)
        ]
        ev = Evaluator(self.model, self.tok, reqs)
        view = (
            self.editor.wrap(self.model, self.tok) if hasattr(self.editor, "wrap") else self.model
        )
        pre = ev.evaluate(self.model, reqs)
        post, times, handle = [], [], None
        if sequential_edit:
            t0 = time.perf_counter()
            handle = self.editor.apply(self.model, self.tok, reqs, sequential=True)
            times = [(time.perf_counter() - t0) / n] * n
            post = ev.evaluate(view, reqs)
        else:
            for r in reqs:
                h = self.editor.apply(self.model, self.tok, [r], sequential=True)
                times.append(h.time_s)
                post += ev.evaluate(view, [r])
                h.restore()

        def shape(row: dict[str, Any]) -> dict[str, Any]:
            return {"rewrite_acc": [row["rel"]], "rephrase_acc": [row["gen"]] if row["gen"] is not None else [],
                    "locality": {"neighborhood_acc": [row["loc"]]} if row["loc"] is not None else {},
                    "portability": {"acc": [row["port"]]} if row["port"] is not None else {}}  # fmt: skip

        metrics = [
            {
                "case_id": i,
                "requested_rewrite": reqs[i].to_dict(),
                "time": times[i],
                "pre": shape(pre[i]),
                "post": shape(post[i]),
            }
            for i in range(n)
        ]
        return metrics, self.model, handle
