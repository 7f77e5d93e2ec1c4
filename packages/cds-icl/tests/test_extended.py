"""Extended tier: the full synthetic accuracy run (report-only, not a claim).

200 test items, k in {16, 32}, random (5 seeds) / CDS / high curvature / KATE / complexity on the
tiny model. k = 32 prompts (~1,200 tokens) pass the fixture's 768 positions, so the run raises
the config limit (RoPE has no learnt positions; the model was trained on 256-token windows, and
accuracy beyond them is not meaningful). Results go to ``$CDS_ICL_EXTENDED_OUT`` (default
``extended_results.json``)."""

from __future__ import annotations

import json
import os

import pytest

pytestmark = pytest.mark.extended


def test_full_accuracy_run(tiny):
    from cds_icl.bench import bench_accuracy
    from cds_icl.runner import load_task

    model, tok = tiny
    model.config.max_position_embeddings = 1536
    data = load_task("synthetic", n_pool=64)
    rows = []
    for k in (16, 32):
        rows += bench_accuracy(model, tok, data, k=k, limit=200)
    out = os.environ.get("CDS_ICL_EXTENDED_OUT", "extended_results.json")
    with open(out, "w") as f:
        json.dump(rows, f, indent=1)
    for r in rows:
        print(r)
    assert all(0.0 <= r["acc"] <= 1.0 for r in rows)
