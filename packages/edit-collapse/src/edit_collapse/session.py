"""Edit sessions: apply requests sequentially (or independently), evaluate at checkpoints
T against outputs of the original model cached before the first edit, track reasoning accuracy
and the collapse diagnostics of the probe states."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from edit_collapse import metrics as M
from edit_collapse.errors import EditInputError
from edit_collapse.requests import EditRequest


@dataclass
class SessionResult:
    """Checkpoint rows (``{method, n_edits, rel, gen, loc, port, avg, reasoning, v_star_missed,
    ...}``; ``v_star_missed`` counts the v*/z* searches so far that ended above their target),
    per-case rows, geometry rows (``{layer, n_edits, median_R, R_small, rho_sigma_R, ...}``) and
    the merged :class:`~edit_collapse.editors.EditHandle` (weights stay edited until
    ``handle.restore()``)."""

    method: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    cases: list[dict[str, Any]] = field(default_factory=list)
    geometry: list[dict[str, Any]] = field(default_factory=list)
    handle: Any = None

    def at(self, n: int) -> dict[str, Any]:
        for r in self.rows:
            if r["n_edits"] == n:
                return r
        raise KeyError(n)


def _checkpoints(eval_at: Sequence[int | str], n: int) -> list[int]:
    out = []
    for t in eval_at:
        v = n if t == "all" else int(t)
        if not 1 <= v <= n:
            raise EditInputError(f"eval_at value {t!r} is outside 1..{n} (the number of requests)")
        out.append(v)
    return sorted(set(out))


class Evaluator:
    """Caches the original model's outputs on every locality prompt, then scores edits."""

    def __init__(self, model: Any, tok: Any, requests: Sequence[EditRequest], mode: str = "teacher_forced",
                 matcher: str = "em", judge: Any = None, max_new_tokens: int = 8) -> None:  # fmt: skip
        if mode not in ("teacher_forced", "generate"):
            raise EditInputError(f"mode={mode!r}: use 'teacher_forced' or 'generate'")
        if matcher == "judge" and judge is None:
            M.match("", "", "judge", None)
        self.tok, self.mode, self.matcher, self.judge, self.extra = (
            tok,
            mode,
            matcher,
            judge,
            max_new_tokens,
        )
        self.loc_pairs = [
            (r.case_id, p, a) for r in requests for ps in r.locality.values() for p, a in ps
        ]
        if mode == "teacher_forced":
            res = M.target_argmax(model, tok, [(p, a) for _, p, a in self.loc_pairs])
            self.loc_orig = {
                (c, p): pred for (c, p, _), (pred, _) in zip(self.loc_pairs, res, strict=True)
            }
        else:
            outs = M.greedy(model, tok, [p for _, p, _ in self.loc_pairs], self._budget("x" * 8))
            self.loc_orig = {(c, p): o for (c, p, _), o in zip(self.loc_pairs, outs, strict=True)}

    def _budget(self, target: str) -> int:
        return len(self.tok(" " + target, add_special_tokens=False)["input_ids"]) + self.extra

    def _scores(self, model: Any, pairs: list[tuple[str, str]]) -> list[float]:
        if not pairs:
            return []
        if self.mode == "teacher_forced":
            return M.teacher_forced_acc(
                model, self.tok, [p for p, _ in pairs], [t for _, t in pairs]
            )
        outs = [M.greedy(model, self.tok, [p], self._budget(t))[0] for p, t in pairs]
        return [
            float(M.match(o, t, self.matcher, self.judge))
            for o, (_, t) in zip(outs, pairs, strict=True)
        ]

    def evaluate(self, model: Any, requests: Sequence[EditRequest]) -> list[dict[str, Any]]:
        """Per-request ``rel``, ``gen``, ``loc``, ``port`` (``None`` when a request has none).
        Each dimension is scored for all requests in one batched call."""
        requests = list(requests)
        rel = self._scores(model, [(r.prompt, r.target_new) for r in requests])
        gen_pairs = [(i, (p, r.target_new)) for i, r in enumerate(requests) for p in r.rephrase]
        port_pairs = [(i, (p, a)) for i, r in enumerate(requests)
                      for ps in r.portability.values() for p, a in ps]  # fmt: skip
        loc_pairs = [(i, (p, a)) for i, r in enumerate(requests)
                     for ps in r.locality.values() for p, a in ps]  # fmt: skip
        gen = self._scores(model, [x for _, x in gen_pairs])
        port = self._scores(model, [x for _, x in port_pairs])
        loc: list[float] = []
        if loc_pairs:
            if self.mode == "teacher_forced":
                res = M.target_argmax(model, self.tok, [x for _, x in loc_pairs])
                loc = [M.locality_acc(pred, self.loc_orig[(requests[i].case_id, p)])
                       for (i, (p, _)), (pred, _) in zip(loc_pairs, res, strict=True)]  # fmt: skip
            else:
                outs = M.greedy(
                    model, self.tok, [p for _, (p, _) in loc_pairs], self._budget("x" * 8)
                )
                loc = [float(o == self.loc_orig[(requests[i].case_id, p)])
                       for (i, (p, _)), o in zip(loc_pairs, outs, strict=True)]  # fmt: skip

        def per_request(pairs: list[tuple[int, Any]], vals: list[float]) -> list[float | None]:
            acc: list[list[float]] = [[] for _ in requests]
            for (i, _), v in zip(pairs, vals, strict=True):
                acc[i].append(v)
            return [sum(a) / len(a) if a else None for a in acc]

        g, lo, po = (
            per_request(gen_pairs, gen),
            per_request(loc_pairs, loc),
            per_request(port_pairs, port),
        )
        return [{"case_id": r.case_id, "rel": rv, "gen": g[i], "loc": lo[i], "port": po[i]}
                for i, (r, rv) in enumerate(zip(requests, rel, strict=True))]  # fmt: skip


def _mean(rows: list[dict[str, Any]], k: str) -> float | None:
    v = [r[k] for r in rows if r.get(k) is not None]
    return sum(v) / len(v) if v else None


def _missed(handle: Any) -> int:
    """v*/z* searches of ``handle`` that missed their target (0 for editors without v*)."""
    f = getattr(handle, "v_star_missed", None)
    return int(f()) if f is not None else 0


def run_edit_session(
    editor: Any,
    model: Any,
    tok: Any,
    requests: Sequence[EditRequest],
    eval_at: Sequence[int | str] = (1, 10, 100, "all"),
    mode: str = "teacher_forced",
    matcher: str = "em",
    reasoning: Sequence[tuple[str, str]] = (),
    probe: Sequence[str] = (),
    geometry_layers: Sequence[int] = (),
    sequential: bool = True,
    judge: Any = None,
    dataset: str = "",
) -> SessionResult:
    """Apply ``requests`` with ``editor`` and evaluate at each checkpoint T on the first T
    requests (sequential), or each request alone from the original weights
    (``sequential=False``, one row at T=1). ``reasoning`` is a list of (prompt, worked answer)
    problems scored by :func:`metrics.reasoning_accuracy`; ``probe`` with ``geometry_layers``
    adds the collapse diagnostics per layer."""
    from edit_collapse.geometry import collapse_summary, hidden_states, relative_change

    requests = list(requests)
    if not requests:
        raise EditInputError("run_edit_session needs at least one request")
    ev = Evaluator(model, tok, requests, mode, matcher, judge)
    out = SessionResult(getattr(editor, "name", type(editor).__name__))
    view = editor.wrap(model, tok) if hasattr(editor, "wrap") else model
    pre_reason = M.reasoning_accuracy(model, tok, reasoning) if reasoning else None
    geo_pre = {}
    if probe and geometry_layers:
        import torch

        H = hidden_states(model, tok, probe, geometry_layers)
        for layer, h in H.items():
            _, S, Vt = torch.linalg.svd(h, full_matrices=False)
            geo_pre[layer] = (h, S, Vt)

    def checkpoint(n: int, cases: list[dict[str, Any]], t: float, missed: int) -> None:
        row = {"method": out.method, "dataset": dataset, "n_edits": n, "sequential": sequential, "mode": mode,
               **{k: _mean(cases, k) for k in ("rel", "gen", "loc", "port")}, "time_s": t,
               "v_star_missed": missed}  # fmt: skip
        row["avg"] = M.average(row)
        if reasoning:
            acc = M.reasoning_accuracy(view, tok, reasoning)
            row |= {"reasoning": acc, "reasoning_pre": pre_reason,
                    "retention": acc / pre_reason if pre_reason else None}  # fmt: skip
        out.rows.append(row)
        if geo_pre:
            post = hidden_states(model, tok, probe, geometry_layers)
            for layer, (h, S, Vt) in geo_pre.items():
                R = relative_change(h, post[layer], Vt, S)
                out.geometry.append(
                    {"method": out.method, "layer": layer, "n_edits": n, **collapse_summary(S, R)}
                )

    if not sequential:
        cases, t, missed = [], 0.0, 0
        for r in requests:
            h = editor.apply(model, tok, [r], sequential=True)
            t += h.time_s
            missed += _missed(h)
            cases += ev.evaluate(view, [r])
            h.restore()
        out.cases = cases
        checkpoint(1, cases, t, missed)
        return out
    done = 0
    for n in _checkpoints(eval_at, len(requests)):
        t0 = time.perf_counter()
        h = editor.apply(model, tok, requests[done:n], sequential=True)
        out.handle = h if out.handle is None else out.handle.merge(h)
        done = n
        cases = ev.evaluate(view, requests[:n])
        for c in cases:
            c["n_edits"] = n
        out.cases += cases
        checkpoint(
            n,
            cases,
            out.handle.time_s if out.handle else time.perf_counter() - t0,
            _missed(out.handle),
        )
    return out
