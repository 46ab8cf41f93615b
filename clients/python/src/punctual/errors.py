"""What the client raises, one class per kind of failure, so a shop catches "punctual went wrong"
in one place (PunctualError) and the precise kinds where it cares (a conflict, a missing task, an
outage).

An error status from the service is an ApiError of the class of its status, carrying the
service's code and message (the message names the field at fault); no answer at all is a
NetworkError. A 409 carries the task as it is now.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from .models import Task


class PunctualError(Exception):
    """Everything this package raises about the service extends this class."""


class ApiError(PunctualError):
    """The service answered with an error status; a status without a class of its own arrives as this class."""

    def __init__(self, status: int, code: str, message: str, body: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.body: Mapping[str, Any] = body or {}

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"


class BadRequestError(ApiError):
    """400: the request is wrong; the message names the field, and nothing was changed."""


class UnauthorizedError(ApiError):
    """401: no bearer token, or an unknown one."""


class ForbiddenError(ApiError):
    """403: the token's role may not call this route (or a gateway in front refused it)."""


class NotFoundError(ApiError):
    """404: no task with that id or key."""


class ConflictError(ApiError):
    """409: the key names a task with other content, the task is not in the state the call needs,
    or a lease is not this worker's any more. `task` is the task as it is now, when the service sent it."""

    def __init__(self, status: int, code: str, message: str, body: Mapping[str, Any] | None = None, task: Task | None = None) -> None:
        super().__init__(status, code, message, body)
        self.task = task


class PayloadTooLargeError(ApiError):
    """413: the body is larger than the service accepts."""


class ServiceUnavailableError(ApiError):
    """503: the service is up but its database is not, or it is stopping; a create with a key is safe to send again."""


class NetworkError(PunctualError):
    """No answer: the service could not be reached, the connection broke, or the call timed out
    (after the retries the call allowed). `attempts` says how many times it was tried."""

    def __init__(self, message: str, attempts: int, timed_out: bool = False) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.timed_out = timed_out


class WebhookVerificationError(PunctualError):
    """A webhook call that must not be trusted. `reason` says why, for the receiver's log:
    "malformed" (no usable X-Punctual-Signature), "expired" (its time is outside the tolerance) or
    "signature" (no signature matches a secret held here)."""

    MALFORMED = "malformed"
    EXPIRED = "expired"
    SIGNATURE = "signature"

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class PermanentFailure(Exception):
    """Raised by a worker's handler for a failure no retry can fix (the member does not exist):
    the task is failed for good with this message instead of being tried again."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    503: ServiceUnavailableError,
}


def api_error(status: int, body: Mapping[str, Any]) -> ApiError:
    """The error class of `status`, carrying the service's code, message and, for a 409, the task."""
    code = body.get("code")
    message = body.get("message")
    code = code if isinstance(code, str) else "UNKNOWN"
    message = message if isinstance(message, str) else f"punctual answered {status}"
    if status == 409:
        from .models import Task

        task = body.get("task")
        return ConflictError(status, code, message, body, Task.from_json(task) if isinstance(task, Mapping) else None)
    return _BY_STATUS.get(status, ApiError)(status, code, message, body)
