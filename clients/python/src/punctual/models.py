"""The service's answers as typed, frozen dataclasses with snake_case fields: a task, a leased
task, a page of pending tasks, a batch's and an ack's results, and what a create sends.

Times are timezone-aware datetimes: `run_at` in UTC, `run_at_local` with the offset of the task's
zone (`timezone`). A field the service adds later is ignored until the client knows it, and a
field an older service does not send takes its default, so client and service may be upgraded
in either order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, List, Literal, Mapping, Optional, Tuple, Union, cast

TaskStatus = Literal["pending", "running", "done", "failed", "cancelled", "skipped"]
Misfire = Literal["run", "skip"]
#: When a task runs: ISO-8601 with an offset, a naive local time (read in `timezone`), epoch
#: milliseconds, or a datetime (an aware one is an instant; a naive one a local time in `timezone`).
RunAt = Union[str, int, datetime]

JsonObject = Dict[str, Any]


def parse_time(value: str) -> datetime:
    """An ISO-8601 time as the service writes it (`2030-12-01T02:00:00.000Z`), as an aware datetime."""
    return datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)


def _time(data: Mapping[str, Any], name: str) -> Optional[datetime]:
    value = data.get(name)
    return parse_time(value) if isinstance(value, str) else None


def _int(data: Mapping[str, Any], name: str) -> Optional[int]:
    value = data.get(name)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def run_at_json(value: RunAt) -> Union[str, int]:
    """What the API takes for a time: an aware datetime as ISO-8601 with its offset (to the
    millisecond), a naive one as a local time (`2030-12-01 10:00:00`, read in the task's zone)."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            return value.isoformat(sep=" ", timespec="milliseconds")
        return value.isoformat(timespec="milliseconds")
    return value


@dataclass(frozen=True)
class Task:
    """A task as the service answers it (GET /tasks/:id and every other task route)."""

    id: int
    key: Optional[str]
    type: str
    payload: Any
    status: TaskStatus
    run_at: datetime
    run_at_local: datetime
    timezone: str
    attempts: int
    max_attempts: int
    misfire: Misfire
    last_error: Optional[str]
    created_at: datetime
    updated_at: datetime
    finished_at: Optional[datetime] = None
    cron: Optional[str] = None
    series_id: Optional[int] = None
    tags: Tuple[str, ...] = ()
    priority: int = 0
    expire_after_ms: Optional[int] = None
    group: Optional[str] = None
    #: What the latest successful run's handler answered; None when it said nothing.
    last_result: Optional[str] = None
    #: How late the latest run started, of what punctual controls, in ms.
    lateness_ms: Optional[int] = None
    #: A webhook run: the latest run's HTTP status (0: no answer came), its duration, its answer's size.
    last_http_status: Optional[int] = None
    last_duration_ms: Optional[int] = None
    last_response_bytes: Optional[int] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Task:
        return cls(
            id=int(data["id"]),
            key=data.get("key"),
            type=str(data["type"]),
            payload=data.get("payload"),
            status=cast(TaskStatus, data["status"]),
            run_at=parse_time(data["runAt"]),
            run_at_local=parse_time(data["runAtLocal"]),
            timezone=str(data["timezone"]),
            attempts=int(data["attempts"]),
            max_attempts=int(data["maxAttempts"]),
            misfire=cast(Misfire, data.get("misfire", "run")),
            last_error=data.get("lastError"),
            created_at=parse_time(data["createdAt"]),
            updated_at=parse_time(data["updatedAt"]),
            finished_at=_time(data, "finishedAt"),
            cron=data.get("cron"),
            series_id=_int(data, "seriesId"),
            tags=tuple(str(tag) for tag in data.get("tags") or ()),
            priority=_int(data, "priority") or 0,
            expire_after_ms=_int(data, "expireAfterMs"),
            group=data.get("group"),
            last_result=data.get("lastResult"),
            lateness_ms=_int(data, "latenessMs"),
            last_http_status=_int(data, "lastHttpStatus"),
            last_duration_ms=_int(data, "lastDurationMs"),
            last_response_bytes=_int(data, "lastResponseBytes"),
        )


@dataclass(frozen=True)
class LeasedTask:
    """A task of a worker type leased to this worker: `attempt` is 1 on the first run,
    `idempotency_key` stays the same across all its attempts, `lease_token` is what ack, nack and
    extend must name. `traceparent` and `tracestate` are the W3C trace context of this run, in the
    trace of the create that made the task (None when it was created without one): start your
    span as a child of this, and the work shows up in the shop's trace."""

    id: int
    key: Optional[str]
    type: str
    payload: Any
    run_at: datetime
    run_at_local: datetime
    timezone: str
    attempt: int
    max_attempts: int
    lease_token: str
    lease_until: datetime
    idempotency_key: str
    traceparent: Optional[str] = None
    tracestate: Optional[str] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LeasedTask:
        return cls(
            id=int(data["id"]),
            key=data.get("key"),
            type=str(data["type"]),
            payload=data.get("payload"),
            run_at=parse_time(data["runAt"]),
            run_at_local=parse_time(data["runAtLocal"]),
            timezone=str(data["timezone"]),
            attempt=int(data["attempt"]),
            max_attempts=int(data["maxAttempts"]),
            lease_token=str(data["leaseToken"]),
            lease_until=parse_time(data["leaseUntil"]),
            idempotency_key=str(data["idempotencyKey"]),
            traceparent=data.get("traceparent") or None,
            tracestate=data.get("tracestate") or None,
        )


@dataclass(frozen=True)
class Created:
    """What a create answers: the task, and whether this call made it (False: the key named a
    task with the same content, e.g. a create sent again after a timeout)."""

    task: Task
    created: bool


@dataclass(frozen=True)
class PendingPage:
    """One page of pending tasks, soonest first; `next_cursor` is None on the last page."""

    tasks: List[Task]
    next_cursor: Optional[str]


@dataclass(frozen=True)
class BatchItem:
    """One item's answer in a batch: the status a single create would get (201, 200, 409, 400),
    the task's id (none for a 400), and for a refusal the code and message."""

    status: int
    id: Optional[int] = None
    key: Optional[str] = None
    code: Optional[str] = None
    message: Optional[str] = None


@dataclass(frozen=True)
class BatchResult:
    results: List[BatchItem]
    created: int
    repeated: int
    refused: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BatchResult:
        items = [
            BatchItem(int(item["status"]), _int(item, "id"), item.get("key"), item.get("code"), item.get("message"))
            for item in data.get("results", [])
        ]
        return cls(items, int(data.get("created", 0)), int(data.get("repeated", 0)), int(data.get("refused", 0)))


@dataclass(frozen=True)
class AckItem:
    """One ack's answer in ack_all: 200 done, 404 no such task, 409 not leased to this token."""

    id: int
    status: int
    message: Optional[str] = None


@dataclass(frozen=True)
class AckAllResult:
    results: List[AckItem]
    acked: int
    refused: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AckAllResult:
        items = [AckItem(int(item["id"]), int(item["status"]), item.get("message")) for item in data.get("results", [])]
        return cls(items, int(data.get("acked", 0)), int(data.get("refused", 0)))


@dataclass(frozen=True)
class NewTask:
    """A task to create, for create_many (create takes the same fields as arguments). Give at most
    one of `run_at` and `delay_ms`; with neither the task runs now (or, with `cron`, at the next match)."""

    type: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    run_at: Optional[RunAt] = None
    delay_ms: Optional[int] = None
    timezone: Optional[str] = None
    key: Optional[str] = None
    max_attempts: Optional[int] = None
    misfire: Optional[Misfire] = None
    cron: Optional[str] = None
    tags: Optional[Tuple[str, ...]] = None
    priority: Optional[int] = None
    on_key_conflict: Optional[Literal["reject", "replace"]] = None
    max_delay_ms: Optional[int] = None
    expire_after_ms: Optional[int] = None
    spread_ms: Optional[int] = None
    group: Optional[str] = None

    def to_json(self) -> JsonObject:
        """The body of POST /tasks: the API's field names, the fields given."""
        body: JsonObject = {
            "type": self.type,
            "payload": dict(self.payload),
            "runAt": None if self.run_at is None else run_at_json(self.run_at),
            "delayMs": self.delay_ms,
            "timezone": self.timezone,
            "key": self.key,
            "maxAttempts": self.max_attempts,
            "misfire": self.misfire,
            "cron": self.cron,
            "tags": None if self.tags is None else list(self.tags),
            "priority": self.priority,
            "onKeyConflict": self.on_key_conflict,
            "maxDelayMs": self.max_delay_ms,
            "expireAfterMs": self.expire_after_ms,
            "spreadMs": self.spread_ms,
            "group": self.group,
        }
        if self.run_at is None and self.delay_ms is None and self.cron is None:
            body["delayMs"] = 0
        return {name: value for name, value in body.items() if value is not None}
