"""W3C trace context through the Python client against the real service: a create's context (the
client's trace_context provider, or a call's own in its place) reaches the task the worker loop
hands its handler, in the caller's trace under a span id of the service's; a create without one
hands the handler none. An empty value is not sent (a recording server shows the headers)."""

from __future__ import annotations

import secrets
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List, Optional, Tuple

from punctual import BadRequestError, Client, LeasedTask, NewTask, Worker

from support import check_environment, env

TYPE = "py_trace_job"


def caller() -> Tuple[str, str, str]:
    """A traceparent of a new trace, its trace id and its span id."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


def hand_one(punctual: Client) -> LeasedTask:
    """The task the worker loop hands its handler, for the one task due."""
    handed: List[LeasedTask] = []

    def handle(task: LeasedTask) -> None:
        handed.append(task)
        worker.stop()

    worker = Worker(punctual, [TYPE], handle, lease_ms=10_000, wait_ms=5_000)
    worker.run(handle_signals=False)
    assert len(handed) == 1, handed
    return handed[0]


class TraceContextTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        check_environment()

    def assert_in_trace(self, trace_id: str, caller_span_id: str, traceparent: Optional[str]) -> None:
        self.assertIsNotNone(traceparent, "the leased task carries a traceparent")
        assert traceparent is not None
        self.assertRegex(traceparent, r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
        _, leased_trace, leased_span, _ = traceparent.split("-")
        self.assertEqual(trace_id, leased_trace, "the caller's trace")
        self.assertNotEqual(caller_span_id, leased_span, "a span of the service's, not the caller's")

    def test_the_providers_context_reaches_the_worker_loops_handler(self) -> None:
        traceparent, trace_id, span_id = caller()
        punctual = Client(
            env("PUNCTUAL_URL"), env("PUNCTUAL_TOKEN"), trace_context=lambda: {"traceparent": traceparent, "tracestate": "shop=checkout"}
        )
        made = punctual.create(TYPE, {"n": 1}).task
        task = hand_one(punctual)
        self.assertEqual(made.id, task.id)
        self.assert_in_trace(trace_id, span_id, task.traceparent)
        self.assertEqual("shop=checkout", task.tracestate)

    def test_a_calls_own_context_takes_the_place_of_the_providers(self) -> None:
        providers, _, _ = caller()
        traceparent, trace_id, span_id = caller()
        punctual = Client(
            env("PUNCTUAL_URL"), env("PUNCTUAL_TOKEN"), trace_context=lambda: {"traceparent": providers, "tracestate": "shop=provider"}
        )
        answer = punctual.create_many([NewTask(TYPE, {"n": 2}, delay_ms=0)], trace_context={"traceparent": traceparent})
        self.assertEqual(1, answer.created)
        task = hand_one(punctual)
        self.assertEqual(answer.results[0].id, task.id)
        self.assert_in_trace(trace_id, span_id, task.traceparent)
        self.assertIsNone(task.tracestate, "the call's context is taken whole, not mixed with the provider's")

    def test_a_create_without_context_hands_the_handler_none(self) -> None:
        # A provider with nothing to give (no active span) sends no header, not an empty one.
        punctual = Client(env("PUNCTUAL_URL"), env("PUNCTUAL_TOKEN"), trace_context=lambda: {"traceparent": "", "tracestate": None})
        made = punctual.create(TYPE, {"n": 3}).task
        task = hand_one(punctual)
        self.assertEqual(made.id, task.id)
        self.assertIsNone(task.traceparent)
        self.assertIsNone(task.tracestate)


class Recorder(BaseHTTPRequestHandler):
    """Keeps each request's trace headers (None: not sent) and refuses it."""

    seen: List[Dict[str, Optional[str]]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        Recorder.seen.append({name: self.headers.get(name) for name in ("traceparent", "tracestate")})
        body = b'{"statusCode":400,"code":"RECORDED","message":"recorded"}'
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's name
        pass


class EmptyValuesTest(unittest.TestCase):
    def test_an_empty_value_is_not_sent(self) -> None:
        server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        Recorder.seen = []
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}"
            empty = Client(url, trace_context=lambda: {"traceparent": "", "tracestate": ""}, retries=0)
            traceparent, _, _ = caller()
            with self.assertRaises(BadRequestError):
                empty.create(TYPE)
            with self.assertRaises(BadRequestError):
                empty.create_many([NewTask(TYPE)], trace_context={"traceparent": traceparent, "tracestate": ""})
        finally:
            server.shutdown()
            server.server_close()
        self.assertEqual(
            [{"traceparent": None, "tracestate": None}, {"traceparent": traceparent, "tracestate": None}],
            Recorder.seen,
        )


if __name__ == "__main__":
    unittest.main()
