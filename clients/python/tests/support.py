"""The real service `npm run test:python` started, for every test: its URL, token and secret from
the environment, a client on it, and waiting for conditions (never for fixed sleeps)."""

from __future__ import annotations

import os
import secrets
import time
from typing import Callable, Optional, TypeVar

from punctual import Client

T = TypeVar("T")

_NEEDED = ("PUNCTUAL_URL", "PUNCTUAL_TOKEN", "PUNCTUAL_WEBHOOK_SECRET", "PUNCTUAL_RECEIVER_URL", "PUNCTUAL_CONFORMANCE_CASES")


def env(name: str) -> str:
    value = os.environ.get(name)
    if value is None:
        raise RuntimeError(f"{name} is not set: run these tests with `npm run test:python` from the project root")
    return value


def check_environment() -> None:
    for name in _NEEDED:
        env(name)


def client() -> Client:
    return Client(env("PUNCTUAL_URL"), env("PUNCTUAL_TOKEN"))


def unique(prefix: str) -> str:
    """A name no other test run uses."""
    return prefix + secrets.token_hex(4)


def wait_for(check: Callable[[], Optional[T]], timeout: float, what: str) -> T:
    """Polls `check` until it answers something other than None or False; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)
