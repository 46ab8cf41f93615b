"""The conformance cases (clients/conformance/cases.json) through the Python client, one test
per case, against the real service `npm run test:python` started, as the TypeScript, PHP and Go
clients run them. Each call goes through the client's own API, with its snake_case names; an
error's kind is its exception class.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import unittest
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Optional

import punctual
from punctual import Client, LeasedTask, NewTask, PermanentFailure, WebhookVerifier, Worker

from case_run import CaseRun
from support import check_environment, client, env, unique

KINDS: Dict[type, str] = {
    punctual.BadRequestError: "bad_request",
    punctual.UnauthorizedError: "unauthorized",
    punctual.ForbiddenError: "forbidden",
    punctual.NotFoundError: "not_found",
    punctual.ConflictError: "conflict",
    punctual.PayloadTooLargeError: "payload_too_large",
    punctual.ServiceUnavailableError: "unavailable",
}
#: The times the API writes in UTC with a Z; runAtLocal has the offset of the task's zone.
UTC_TIMES = {"runAt", "createdAt", "updatedAt", "finishedAt", "leaseUntil"}
RUN = unique("py-")


def camel(name: str) -> str:
    return re.sub(r"_([a-z])", lambda match: match.group(1).upper(), name)


def snake(name: str) -> str:
    return re.sub(r"([A-Z])", lambda match: "_" + match.group(1).lower(), name)


def snake_args(fields: Dict[str, Any]) -> Dict[str, Any]:
    return {snake(name): value for name, value in fields.items()}


def view(value: Any, name: str = "") -> Any:
    """The client's dataclasses as JSON-like values with the API's names and time formats."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {camel(field.name): view(getattr(value, field.name), camel(field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, datetime):
        if name in UTC_TIMES:
            return value.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return value.isoformat(timespec="milliseconds")
    if isinstance(value, (list, tuple)):
        return [view(item) for item in value]
    if isinstance(value, dict):
        return {key: view(item) for key, item in value.items()}
    return value


def leased(task_view: Dict[str, Any]) -> LeasedTask:
    return LeasedTask.from_json(task_view)


def work(punctual_client: Client, args: Dict[str, Any]) -> Dict[str, Any]:
    """The worker loop for the case `work`: handles `tasks` runs as the case file says, then stops."""
    handled: List[Dict[str, Any]] = []

    def handle(task: LeasedTask) -> None:
        handled.append(
            {
                "id": task.id,
                "attempt": task.attempt,
                "idempotencyKey": task.idempotency_key,
                "traceparent": task.traceparent,
                "tracestate": task.tracestate,
            }
        )
        if len(handled) >= args["tasks"]:
            worker.stop()
        if task.payload.get("do") == "fail-once" and task.attempt == 1:
            raise RuntimeError(task.payload["message"])
        if task.payload.get("do") == "permanent":
            raise PermanentFailure(task.payload["message"])

    worker = Worker(punctual_client, args["types"], handle, lease_ms=args["leaseMs"], wait_ms=args["waitMs"])
    deadline = threading.Timer(60, worker.stop)
    deadline.start()
    try:
        worker.run(handle_signals=False)
    finally:
        deadline.cancel()
    return {"handled": handled}


def calls(c: Client) -> Dict[str, Callable[[Dict[str, Any]], Any]]:
    return {
        "create": lambda a: c.create(**snake_args(a["task"]), trace_context=a.get("traceContext")),
        "createMany": lambda a: c.create_many((NewTask(**snake_args(task)) for task in a["tasks"]), trace_context=a.get("traceContext")),
        "get": lambda a: c.get(a["id"]),
        "getByKey": lambda a: c.get_by_key(a["key"]),
        "cancelByKey": lambda a: c.cancel_by_key(a["key"]),
        "pending": lambda a: c.pending(**snake_args(a)),
        "allPending": lambda a: {"tasks": list(c.all_pending(**snake_args(a)))},
        "lease": lambda a: {"tasks": c.lease(a["types"], **snake_args({k: v for k, v in a.items() if k != "types"}))},
        "extend": lambda a: c.extend(leased(a["task"]), a["leaseMs"]),
        "ack": lambda a: c.ack(leased(a["task"])),
        "nack": lambda a: c.nack(leased(a["task"]), a["error"], permanent=a.get("permanent", False)),
        "work": lambda a: work(c, a),
        "verifyWebhook": lambda a: {
            "valid": WebhookVerifier(a["secrets"]).is_valid(a["body"], a["signature"], a["method"], a["url"], a["idempotencyKey"])
        },
    }


def error_view(error: BaseException) -> Optional[Dict[str, Any]]:
    if not isinstance(error, punctual.ApiError):
        return None
    shown: Dict[str, Any] = {"kind": KINDS.get(type(error), "api"), "status": error.status, "code": error.code, "message": error.message}
    if isinstance(error, punctual.ConflictError) and error.task is not None:
        shown["task"] = view(error.task)
    return shown


class ConformanceTest(unittest.TestCase):
    """One test per case, named after it; filled in below from the case file."""

    def test_00_the_service_and_the_cases_are_there(self) -> None:
        check_environment()
        self.assertGreater(len([name for name in dir(self) if name.startswith("test_")]), 1, "no case was read")


def _case_test(case: Dict[str, Any]) -> Callable[[ConformanceTest], None]:
    def test(self: ConformanceTest) -> None:
        table = calls(client())

        def call(name: str, args: Dict[str, Any]) -> Any:
            if name not in table:
                raise AssertionError(f"the Python runner has no call {name}")
            return view(table[name](args))

        placeholders = {"run": RUN, "receiver": env("PUNCTUAL_RECEIVER_URL"), "secret": env("PUNCTUAL_WEBHOOK_SECRET")}
        CaseRun(case, placeholders, call, error_view).run()

    test.__doc__ = case["checks"]
    skip = case.get("skip", {}).get("python")
    return unittest.skip(skip)(test) if skip is not None else test


def _load() -> None:
    try:
        path = env("PUNCTUAL_CONFORMANCE_CASES")
    except RuntimeError:
        return  # test_00 says what is missing
    with open(path, encoding="utf-8") as file:
        cases = json.load(file)["cases"]
    for index, case in enumerate(cases, start=1):
        name = "test_%02d_%s" % (index, re.sub(r"\W+", "_", case["name"]).strip("_"))
        setattr(ConformanceTest, name, _case_test(case))


_load()

if __name__ == "__main__":
    unittest.main()
