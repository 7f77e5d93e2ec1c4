"""``spec-align serve-judge``: the rule judge behind an OpenAI-compatible HTTP API (loopback).

``POST /v1/chat/completions`` reads a joint or sequential judge prompt (as built by
:mod:`spec_align.judge`), finds the scenario by its spec texts and the item by its query, runs
:class:`~spec_align.judge.RuleJudge` and answers in the judge text protocol; ``GET /v1/models``
lists the served name. It exists so the HTTP judge path can be tested end to end for real.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from spec_align.data import PromptItem, Scenario
from spec_align.errors import SpecConfigError
from spec_align.judge import RuleJudge

LOOPBACK = ("127.0.0.1", "localhost", "::1")
MODEL_NAME = "rule-judge"


class RuleJudgeService:
    """Maps judge prompts back to (scenario, item, response) and answers with rule verdicts."""

    def __init__(self, scenarios: list[Scenario]) -> None:
        self.judge = RuleJudge()
        self.by_spec: dict[str, tuple[Scenario, int]] = {}
        self.items: dict[tuple[str, str], PromptItem] = {}
        for s in scenarios:
            for k, spec in enumerate([*s.safety_specs, *s.behavioral_specs]):
                self.by_spec.setdefault(spec, (s, k))
            for it in s.items:
                self.items.setdefault((s.name, it.prompt), it)

    @staticmethod
    def _between(text: str, a: str, b: str) -> str:
        m = re.search(re.escape(a) + r"\n(.*?)\n" + re.escape(b), text, re.S)
        if m is None:
            raise SpecConfigError(f"judge prompt has no {a} ... {b} block")
        return m.group(1)

    def answer(self, user: str) -> str:
        query = self._between(user, "<query_begin>", "<query_end>")
        response = self._between(user, "<response_begin>", "<response_end>")
        if "## Safety Specifications" in user:
            first = re.search(r"## Safety Specifications\n\n<1>\n(.*?)\n", user)
            if first is None or first.group(1) not in self.by_spec:
                raise SpecConfigError("unknown scenario: the first safety spec is not served")
            s = self.by_spec[first.group(1)][0]
            item = self._item(s, query)
            return self.judge.render_joint(self.judge.judge(item, response, s))
        m = re.search(r"Specification:\n(.*?)\n\n<query_begin>", user, re.S)
        if m is None or m.group(1) not in self.by_spec:
            raise SpecConfigError("unknown specification in a sequential judge prompt")
        s, k = self.by_spec[m.group(1)]
        v = self.judge.judge(self._item(s, query), response, s)
        return self.judge.render_sequential([*v.safety, *v.behavioral][k])

    def _item(self, s: Scenario, query: str) -> PromptItem:
        it = self.items.get((s.name, query))
        if it is None:
            raise SpecConfigError(f"query not found in scenario {s.name!r}")
        return it


def make_server(service: RuleJudgeService, host: str = "127.0.0.1", port: int = 0):
    """A ``ThreadingHTTPServer`` bound to loopback (other hosts are refused)."""
    if host not in LOOPBACK:
        raise SpecConfigError(f"serve-judge binds to loopback only (127.0.0.1), got host={host!r}")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, code: int, obj: dict[str, Any]) -> None:
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send(200, {"object": "list", "data": [{"id": MODEL_NAME, "object": "model"}]})
            elif self.path.rstrip("/") == "/health":
                self._send(200, {"status": "ok"})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                user = next(m["content"] for m in reversed(req["messages"]) if m["role"] == "user")
                text = service.answer(user)
            except (ValueError, KeyError, StopIteration, json.JSONDecodeError) as exc:
                self._send(400, {"error": {"message": str(exc)}})
                return
            n_prompt = sum(len(m.get("content", "").split()) for m in req["messages"])
            n_out = len(text.split())
            self._send(
                200,
                {
                    "id": "chatcmpl-rule",
                    "object": "chat.completion",
                    "model": req.get("model", MODEL_NAME),
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": text},
                        }
                    ],
                    "usage": {
                        "prompt_tokens": n_prompt,
                        "completion_tokens": n_out,
                        "total_tokens": n_prompt + n_out,
                    },
                },
            )

    return ThreadingHTTPServer((host, port), Handler)


def serve_in_thread(service: RuleJudgeService, host: str = "127.0.0.1", port: int = 0):
    """Start a server on a daemon thread; returns ``(server, base_url)``."""
    srv = make_server(service, host, port)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://{host}:{srv.server_address[1]}/v1"
