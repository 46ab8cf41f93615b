"""punctual's Python client: schedule, cancel and list tasks, run pull workers, verify webhooks.

    from punctual import Client
    punctual = Client("http://127.0.0.1:3000", token="…")
    punctual.create("close_order", {"orderSn": "SN123"}, delay_ms=30 * 60_000, key="close_order:SN123")
"""

from .client import Client
from .errors import (
    ApiError,
    BadRequestError,
    ConflictError,
    ForbiddenError,
    NetworkError,
    NotFoundError,
    PayloadTooLargeError,
    PermanentFailure,
    PunctualError,
    ServiceUnavailableError,
    UnauthorizedError,
    WebhookVerificationError,
)
from .models import AckAllResult, AckItem, BatchItem, BatchResult, Created, LeasedTask, NewTask, PendingPage, Task
from .webhooks import WebhookVerifier, canonical_url
from .worker import Worker

__all__ = [
    "AckAllResult",
    "AckItem",
    "ApiError",
    "BadRequestError",
    "BatchItem",
    "BatchResult",
    "Client",
    "ConflictError",
    "Created",
    "ForbiddenError",
    "LeasedTask",
    "NetworkError",
    "NewTask",
    "NotFoundError",
    "PayloadTooLargeError",
    "PendingPage",
    "PermanentFailure",
    "PunctualError",
    "ServiceUnavailableError",
    "Task",
    "UnauthorizedError",
    "WebhookVerificationError",
    "WebhookVerifier",
    "Worker",
    "canonical_url",
]
