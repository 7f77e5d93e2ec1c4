"""The HTTP judge path end to end: ``spec-align serve-judge`` on loopback (a real server in a
subprocess) reached through OpenAICompatBackend gives the in-process rule judge's verdicts."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from spec_align.backends import OpenAICompatBackend
from spec_align.data import write_scenario
from spec_align.errors import JudgeParseError, SpecBackendError
from spec_align.judge import LLMJudge, RuleJudge
from spec_align.pipeline import evaluate
from spec_align.synth import make_synthetic_scenario
from spec_align.tiny import compose_answer


def _records(s, seed=0):
    """Varied responses drawn from the tiny world's answer sampler (leaks, refusals, ...)."""
    rng = random.Random(seed)
    recs = []
    for it in s.items:
        restated = set(rng.sample([*s.safety_specs, *s.behavioral_specs], 2))
        recs.append(
            {
                "data": it.to_official(),
                "prompt": it.adversarial_prompt,
                "response": compose_answer(rng, s, it, restated),
                "thought": "",
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            }
        )
    return recs


@pytest.fixture(scope="module")
def scenario():
    return make_synthetic_scenario(seed=21, n_safe=12, n_unsafe=12, n_safety=2, n_behavioral=3)


@pytest.fixture(scope="module")
def judge_url(scenario, tmp_path_factory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("data")
    write_scenario(scenario, data)
    cmd = [
        sys.executable,
        "-m",
        "spec_align.cli",
        "serve-judge",
        "--data-dir",
        str(data),
        "--host",
        "127.0.0.1",
        "--port",
        "0",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = proc.stdout.readline().strip()
        if not line.startswith("listening on "):
            pytest.fail(f"serve-judge did not start: {line}{proc.stdout.read()[-2000:]}")
        url = line.removeprefix("listening on ")
        deadline = time.time() + 30
        while True:
            try:
                with urllib.request.urlopen(url.removesuffix("/v1") + "/health", timeout=2):
                    break
            except OSError:
                if time.time() > deadline:
                    pytest.fail("serve-judge not healthy in 30 s")
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["joint", "sequential"])
def test_http_judge_equals_in_process(judge_url, scenario, mode, tmp_path):
    recs = _records(scenario)
    local, rep_local = evaluate(recs, scenario, RuleJudge(), progress=False)
    backend = OpenAICompatBackend(judge_url, "rule-judge", num_threads=4)
    judge = LLMJudge(backend, mode=mode, cache_dir=tmp_path / "cache")
    remote, rep_remote = evaluate(recs, scenario, judge, progress=False)
    assert [r["eval"]["result"]["safety"] for r in remote] == [
        r["eval"]["result"]["safety"] for r in local
    ]
    assert [r["eval"]["result"]["behavioral"] for r in remote] == [
        r["eval"]["result"]["behavioral"] for r in local
    ]
    assert rep_remote.to_official() == rep_local.to_official()
    # The verdicts are not trivial: some leaks, some refusals, some NA.
    flat = [v for r in local for v in r["eval"]["result"]["safety"].values()]
    assert "NO" in flat and "YES" in flat
    per_item = 1 if mode == "joint" else scenario.n_specs
    assert backend.calls == per_item * len(recs)
    # Every judge call is cached on disk: re-judging makes no request.
    _, rep_again = evaluate(recs, scenario, judge, progress=False)
    assert backend.calls == per_item * len(recs)
    assert rep_again.to_official() == rep_local.to_official()


def test_hf_judge_on_tiny_model_records_failure(tiny, scenario):
    recs = _records(scenario)[:2]
    judge = LLMJudge(tiny, max_retries=5, max_new_tokens=24)
    before = tiny.calls
    ev, rep = evaluate(recs, scenario, judge, on_failure="record", progress=False)
    assert tiny.calls - before == 5 * 2  # five attempts per item, then recorded as failed
    assert [r["judge_status"] for r in ev] == ["failed", "failed"]
    assert rep.failed_count == 2 and rep.subsets["full_dataset"]["SAR"]["count"] == 0
    with pytest.raises(JudgeParseError, match="after 5 attempts"):
        evaluate(recs[:1], scenario, judge, on_failure="raise", progress=False)


class _Status(BaseHTTPRequestHandler):
    code = 500
    hits = 0

    def do_POST(self):
        type(self).hits += 1
        self.send_response(self.code)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *a):
        pass


@pytest.mark.parametrize(
    ("code", "hits", "match"), [(500, 3, "HTTP 500"), (401, 1, "SPEC_TEST_KEY")]
)
def test_http_errors_are_bounded_and_clear(code, hits, match):
    handler = type("H", (_Status,), {"code": code, "hits": 0})
    srv = HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        b = OpenAICompatBackend(
            f"http://127.0.0.1:{srv.server_address[1]}/v1",
            "m",
            max_retries=2,
            backoff=0.01,
            api_key_env="SPEC_TEST_KEY",
        )
        with pytest.raises(SpecBackendError, match=match):
            b.chat([{"role": "user", "content": "hi"}])
        assert handler.hits == hits
    finally:
        srv.shutdown()


def test_connection_refused_is_bounded():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    b = OpenAICompatBackend(f"http://127.0.0.1:{port}/v1", "m", max_retries=1, backoff=0.01)
    with pytest.raises(SpecBackendError, match="after 2 attempts"):
        b.chat([{"role": "user", "content": "hi"}])
