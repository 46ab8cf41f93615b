"""punctual's HTTP API for a Python shop (Django, FastAPI, a script): a method per task route,
the pull workers' routes and loop, and typed answers (models.py) and errors (errors.py).

    punctual = Client("http://127.0.0.1:3000", token=os.environ["PUNCTUAL_TOKEN"])
    punctual.create("close_order", {"orderSn": "SN123"}, delay_ms=30 * 60_000, key="close_order:SN123")
    punctual.cancel_by_key("close_order:SN123")  # the order was paid

What it decides: synchronous calls on the standard library alone (no dependency to install or
to clash with a shop's own); names in snake_case, sent as the API's camelCase; a client may be
shared by threads (it holds no connection between calls).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Literal, Mapping, Optional, Sequence
from urllib.parse import quote, urlencode

from ._http import Abort, Transport
from .models import (
    AckAllResult,
    BatchResult,
    Created,
    LeasedTask,
    Misfire,
    NewTask,
    PendingPage,
    RunAt,
    Task,
    run_at_json,
)

def _query(fields: Mapping[str, Any]) -> str:
    given = {name: value for name, value in fields.items() if value is not None}
    return "?" + urlencode(given) if given else ""


def _key(key: str) -> str:
    return quote(key, safe="")


TraceContext = Mapping[str, Optional[str]]
"""W3C trace context headers: {"traceparent": ..., "tracestate": ...} (what OpenTelemetry's
propagate.inject writes into a dict)."""


class Client:
    def __init__(
        self,
        base_url: str,
        token: Optional[str] = None,
        *,
        timeout: float = 10.0,
        retries: int = 2,
        retry_delay: float = 0.2,
        trace_context: Optional[Callable[[], Optional[TraceContext]]] = None,
    ) -> None:
        """`base_url`: where punctual listens, e.g. http://127.0.0.1:3000; `token`: API_TOKEN or a
        token with a role, when the service has tokens; `timeout`: seconds per attempt; `retries`:
        extra attempts after a connection error, for the calls that allow it; `trace_context`:
        answers the caller's W3C trace context for each create and create_many, sent as headers so
        the task's runs join the caller's trace (with OpenTelemetry: a function that does
        `carrier = {}; propagate.inject(carrier); return carrier`)."""
        self._http = Transport(base_url, token, timeout, retries, retry_delay)
        self._trace_context = trace_context

    def _trace_headers(self, given: Optional[TraceContext]) -> dict[str, str]:
        """A create's trace headers: the call's own context, else the client's trace_context's; an
        empty value is not sent (the server validates the rest, and ignores what is malformed)."""
        context = given if given is not None else (self._trace_context() if self._trace_context is not None else None)
        if not context:
            return {}
        return {name: value for name in ("traceparent", "tracestate") if isinstance(value := context.get(name), str) and value}

    # ── tasks ──────────────────────────────────────────────────────────────────────────────

    def create(
        self,
        type: str,
        payload: Optional[Mapping[str, Any]] = None,
        *,
        run_at: Optional[RunAt] = None,
        delay_ms: Optional[int] = None,
        timezone: Optional[str] = None,
        key: Optional[str] = None,
        max_attempts: Optional[int] = None,
        misfire: Optional[Misfire] = None,
        cron: Optional[str] = None,
        tags: Optional[Sequence[str]] = None,
        priority: Optional[int] = None,
        on_key_conflict: Optional[Literal["reject", "replace"]] = None,
        max_delay_ms: Optional[int] = None,
        expire_after_ms: Optional[int] = None,
        spread_ms: Optional[int] = None,
        group: Optional[str] = None,
        trace_context: Optional[TraceContext] = None,
    ) -> Created:
        """Schedules a task at `run_at` or `delay_ms` from now (neither: now). `created` is False
        when `key` named a task with the same content (a create sent again); a key taken by other
        content raises ConflictError, unless `on_key_conflict="replace"`. `trace_context` is this
        create's W3C trace context, in place of the client's."""
        task = NewTask(
            type,
            payload or {},
            run_at,
            delay_ms,
            timezone,
            key,
            max_attempts,
            misfire,
            cron,
            None if tags is None else tuple(tags),
            priority,
            on_key_conflict,
            max_delay_ms,
            expire_after_ms,
            spread_ms,
            group,
        )
        # With a key, a second send finds the task the first one made: safe to repeat.
        headers = self._trace_headers(trace_context)
        status, body = self._http.call("POST", "/tasks", task.to_json(), safe=key is not None, headers=headers)
        return Created(Task.from_json(body), status == 201)

    def create_many(self, tasks: Iterable[NewTask], *, trace_context: Optional[TraceContext] = None) -> BatchResult:
        """Up to 1,000 creates in one request, each answered as a create would be, in order; a bad
        item refuses only itself. `trace_context` as for create."""
        items = [task.to_json() for task in tasks]
        keyed = bool(items) and all("key" in item for item in items)
        headers = self._trace_headers(trace_context)
        return BatchResult.from_json(self._http.call("POST", "/tasks/batch", {"tasks": items}, safe=keyed, headers=headers)[1])

    def get(self, id: int) -> Task:
        return Task.from_json(self._http.call("GET", f"/tasks/{int(id)}")[1])

    def get_by_key(self, key: str) -> Task:
        return Task.from_json(self._http.call("GET", f"/tasks/by-key/{_key(key)}")[1])

    def cancel(self, id: int) -> Task:
        """Cancels a pending task; ConflictError (with the task) when it is not pending any more."""
        return Task.from_json(self._http.call("POST", f"/tasks/{int(id)}/cancel")[1])

    def cancel_by_key(self, key: str) -> Task:
        """Cancels by key, what a shop does when the order is paid: ConflictError means the task
        already ran (check the order), NotFoundError that there never was one."""
        return Task.from_json(self._http.call("POST", f"/tasks/by-key/{_key(key)}/cancel")[1])

    def reschedule(self, id: int, *, run_at: Optional[RunAt] = None, delay_ms: Optional[int] = None, timezone: Optional[str] = None) -> Task:
        """Moves a pending task (a naive run_at is read in `timezone`, else the task's zone)."""
        body = {"runAt": None if run_at is None else run_at_json(run_at), "delayMs": delay_ms, "timezone": timezone}
        return Task.from_json(self._http.call("POST", f"/tasks/{int(id)}/reschedule", _given(body))[1])

    def retry(self, id: int, *, run_at: Optional[RunAt] = None, delay_ms: Optional[int] = None, timezone: Optional[str] = None) -> Task:
        """Runs a failed task again, now or at the time given; its attempts start over."""
        body = {"runAt": None if run_at is None else run_at_json(run_at), "delayMs": delay_ms, "timezone": timezone}
        return Task.from_json(self._http.call("POST", f"/tasks/{int(id)}/retry", _given(body))[1])

    # ── the test clock ─────────────────────────────────────────────────────────────────────

    def clock(self) -> dict[str, Any]:
        """The test clock's time: {"testClock": True, "now": ISO-8601 UTC, "nowMs": int}. Only a
        service started with `--test-clock` (TEST_CLOCK=on) has one: otherwise NotFoundError."""
        return dict(self._http.call("GET", "/test/clock")[1])

    def advance(self, ms: int, *, wait_ms: int = 10_000) -> dict[str, Any]:
        """Moves the test clock `ms` forward and returns once every task due on the way has run, in
        due order (retries whose backoff lands inside too). The answer adds "settled" (False:
        "running" names the tasks still running after `wait_ms`), "steps" and "held"."""
        return self._move_clock({"advanceMs": ms, "waitMs": wait_ms})

    def set_time(self, at: RunAt, *, timezone: Optional[str] = None, wait_ms: int = 10_000) -> dict[str, Any]:
        """Moves the test clock to `at` (an aware datetime, epoch ms, ISO-8601 with an offset, or a
        naive local time read in `timezone`), as advance() does; never back."""
        return self._move_clock(_given({"to": run_at_json(at), "timezone": timezone, "waitMs": wait_ms}))

    def _move_clock(self, body: dict[str, Any]) -> dict[str, Any]:
        # Not retried: a move that reached the service and is sent again moves twice.
        wait = body.get("waitMs", 10_000) / 1000
        return dict(self._http.call("POST", "/test/clock", body, timeout=self._http.timeout + wait)[1])

    def edit_payload(self, id: int, payload: Mapping[str, Any]) -> Task:
        """Replaces a pending task's payload (ConflictError when it is not pending any more)."""
        return Task.from_json(self._http.call("PUT", f"/tasks/{int(id)}/payload", {"payload": dict(payload)})[1])

    def delete(self, id: int) -> Task:
        """Deletes a task that is not running, with its runs; answers it as it was."""
        return Task.from_json(self._http.call("DELETE", f"/tasks/{int(id)}")[1])

    def pending(
        self,
        *,
        type: Optional[str] = None,
        tag: Optional[str] = None,
        key_prefix: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> PendingPage:
        """One page of pending tasks, soonest first; pass `next_cursor` as `cursor` for the next."""
        query = _query({"type": type, "tag": tag, "keyPrefix": key_prefix, "limit": limit, "cursor": cursor})
        body = self._http.call("GET", f"/tasks/pending{query}")[1]
        return PendingPage([Task.from_json(task) for task in body.get("tasks", [])], body.get("nextCursor"))

    def all_pending(
        self, *, type: Optional[str] = None, tag: Optional[str] = None, key_prefix: Optional[str] = None, page_size: int = 500
    ) -> Iterator[Task]:
        """Every pending task, soonest first, a page (one request) at a time."""
        cursor: Optional[str] = None
        while True:
            page = self.pending(type=type, tag=tag, key_prefix=key_prefix, limit=page_size, cursor=cursor)
            yield from page.tasks
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def runs(self, id: int, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> dict[str, Any]:
        """A task's runs, one per attempt, newest first: {"runs": [...], "nextCursor": ...}."""
        body: dict[str, Any] = self._http.call("GET", f"/tasks/{int(id)}/runs{_query({'limit': limit, 'cursor': cursor})}")[1]
        return body

    # ── pull workers (the worker role) ─────────────────────────────────────────────────────

    def lease(self, types: Sequence[str], *, max: int = 1, lease_ms: int = 30_000, wait_ms: int = 0, abort: Optional[Abort] = None) -> list[LeasedTask]:
        """Leases up to `max` due tasks of worker types; with `wait_ms` (at most 30,000) the
        request waits until one falls due, or answers none when that long passed. `abort` gives
        the wait up from another thread or a signal handler (the Worker's stop)."""
        body = {"types": list(types), "max": max, "leaseMs": lease_ms, "waitMs": wait_ms}
        # A lost answer may have leased tasks: they come back when the lease runs out, so a retry is harmless.
        answer = self._http.call("POST", "/workers/lease", body, safe=True, timeout=self._http.timeout + wait_ms / 1000, abort=abort)[1]
        return [LeasedTask.from_json(task) for task in answer.get("tasks", [])]

    def extend(self, task: LeasedTask, lease_ms: int) -> Task:
        """The leased task needs longer: its lease runs `lease_ms` from now."""
        body = {"leaseToken": task.lease_token, "leaseMs": lease_ms}
        return Task.from_json(self._http.call("POST", f"/tasks/{task.id}/extend", body, safe=True)[1])

    def ack(self, task: LeasedTask) -> Task:
        """The leased task is done; ConflictError when the lease is not this token's any more."""
        return Task.from_json(self._http.call("POST", f"/tasks/{task.id}/ack", {"leaseToken": task.lease_token})[1])

    def ack_all(self, tasks: Iterable[LeasedTask]) -> AckAllResult:
        """Several leased tasks are done, in one request (up to 1,000): one result per task, in order."""
        acks = [{"id": task.id, "leaseToken": task.lease_token} for task in tasks]
        return AckAllResult.from_json(self._http.call("POST", "/workers/ack", {"acks": acks})[1])

    def nack(self, task: LeasedTask, error: str, *, retry_at: Optional[RunAt] = None, permanent: bool = False) -> Task:
        """The leased task failed: tried again with the backoff (or at `retry_at`), or failed for
        good when `permanent`; `error` is kept as its last_error."""
        retry = None if retry_at is None else run_at_json(retry_at)
        body = {"leaseToken": task.lease_token, "error": error[:2000], "retryAt": retry, "permanent": permanent or None}
        return Task.from_json(self._http.call("POST", f"/tasks/{task.id}/nack", _given(body))[1])

    def workers(self) -> dict[str, Any]:
        """The worker types with their leased, pending and failed tasks, and the lease requests
        waiting in the answering process: {"waitingHere": n, "types": [...]}."""
        body: dict[str, Any] = self._http.call("GET", "/workers")[1]
        return body

    def work(
        self,
        types: Sequence[str],
        handler: Callable[[LeasedTask], object],
        *,
        lease_ms: int = 30_000,
        wait_ms: int = 25_000,
        on_error: Optional[Callable[[BaseException], None]] = None,
        handle_signals: bool = True,
    ) -> int:
        """The worker loop (worker.py): leases one task at a time and runs `handler` on it until
        SIGTERM or SIGINT; answers how many tasks it handled."""
        from .worker import Worker

        worker = Worker(self, types, handler, lease_ms=lease_ms, wait_ms=wait_ms, on_error=on_error)
        return worker.run(handle_signals=handle_signals)

    # ── the service ────────────────────────────────────────────────────────────────────────

    def healthy(self) -> bool:
        """True when the process answers at all (/healthz)."""
        return bool(self._http.call("GET", "/healthz")[1].get("status") == "ok")

    def ready(self) -> bool:
        """True when the service armed its timers and its database answers (/readyz); False on its 503."""
        from .errors import ServiceUnavailableError

        try:
            self._http.call("GET", "/readyz")
            return True
        except ServiceUnavailableError:
            return False


def _given(fields: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not None}
