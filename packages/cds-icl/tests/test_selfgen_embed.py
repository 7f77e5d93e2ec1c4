"""Self-generated pool variants on the tiny model; the OpenAI-compatible embeddings client
against a local stdlib server."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np
import pytest
from cds_icl.embed import embed


def test_pool_variants_keep_only_their_labels(tiny):
    from cds_icl.selfgen import generate_self_pool
    from cds_icl.synthetic import INSTRUCTION_SYNTH, synthetic_split

    items = synthetic_split()[0][:8]
    probs = [{"idx": it["idx"], "problem": it["problem"], "gold": it["answer"]} for it in items]
    kw = dict(max_attempts=2, max_new_tokens=40, task="synthetic", instruction=INSTRUCTION_SYNTH,
              stop=("###",), seed=3)  # fmt: skip
    first = generate_self_pool(tiny, probs, "firstans", **kw)
    assert len(first) == 8 and all(d.meta["source"] == "self" for d in first)
    assert all("\\boxed{" in d.solution for d in first)
    wrong = generate_self_pool(tiny, probs, "wrongans", **kw)  # the tiny model is mostly wrong
    assert len(wrong) >= 1 and all(d.meta["label"] is False for d in wrong)
    try:
        right = generate_self_pool(tiny, probs, "correctans", **kw)
        assert all(d.meta["label"] is True for d in right)
    except ValueError as e:
        assert "correctans pool is empty" in str(e)
    with pytest.raises(ValueError, match="unknown pool variant"):
        generate_self_pool(tiny, probs, "bestans")


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        data = [{"index": i, "embedding": [float(len(t)), 1.0, float(i)]}
                for i, t in enumerate(body["input"])][::-1]  # fmt: skip
        out = json.dumps({"data": data, "model": body["model"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *a):
        pass


def test_openai_embeddings_client():
    srv = HTTPServer(("127.0.0.1", 0), _Handler)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        url = f"http://127.0.0.1:{srv.server_port}/v1"
        E = embed(["ab", "abcd"], "openai", model="m", base_url=url, normalize=False)
    finally:
        srv.shutdown()
    np.testing.assert_array_equal(E, [[2.0, 1.0, 0.0], [4.0, 1.0, 1.0]])
    assert E.dtype == np.float64
