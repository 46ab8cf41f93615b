"""One HTTP call to the service, with the retries that are safe, on the standard library's
http.client.

What it decides:
- A connection per call (no pool): calls are few and short next to the work a shop does around
  them, and a call never meets a connection the service closed while it sat idle.
- A call that certainly never reached the service (the connection was refused, the name did not
  resolve) is retried; a call that may have reached it (a timeout, a connection broken mid-answer)
  is retried only when sending it twice does no harm (`safe`: a read, a create with a key, a
  lease, an extend). The pause doubles from `retry_delay`.
- An `Abort` lets another thread or a signal handler give up a call that is waiting (the worker's
  long poll on stop): it shuts the call's socket down, and the call raises NetworkError at once.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from typing import Any, Mapping, Optional, Tuple
from urllib.parse import urlsplit

from .errors import NetworkError, api_error


class Abort:
    """Gives up the call it is passed to, from another thread or a signal handler."""

    def __init__(self) -> None:
        self._connection: Optional[http.client.HTTPConnection] = None
        self.fired = False

    def fire(self) -> None:
        self.fired = True
        connection = self._connection
        if connection is not None and connection.sock is not None:
            try:
                connection.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _hold(self, connection: Optional[http.client.HTTPConnection]) -> None:
        self._connection = connection


class Transport:
    def __init__(self, base_url: str, token: Optional[str], timeout: float, retries: int, retry_delay: float) -> None:
        parts = urlsplit(base_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url must be an http:// or https:// URL, not {base_url!r}")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path
        self._headers = {"Accept": "application/json", "User-Agent": "punctual-python"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self.timeout = timeout
        self._retries = retries
        self._retry_delay = retry_delay

    def call(
        self,
        method: str,
        path: str,
        body: Optional[Mapping[str, Any]] = None,
        *,
        safe: Optional[bool] = None,
        timeout: Optional[float] = None,
        abort: Optional[Abort] = None,
        json_answer: bool = True,
        headers: Optional[Mapping[str, str]] = None,
    ) -> Tuple[int, Any]:
        """Sends one request (with `headers` beside the client's); answers (status, decoded JSON)
        or raises the ApiError of the status."""
        safe = method == "GET" if safe is None else safe
        data = None if body is None else json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        attempt = 0
        failure: Exception
        while True:
            attempt += 1
            try:
                status, text = self._send(method, path, data, timeout or self.timeout, abort, headers)
                break
            except (ConnectionRefusedError, socket.gaierror) as error:
                failure, sent, timed_out = error, False, False
            except (OSError, http.client.HTTPException) as error:
                failure, sent, timed_out = error, True, isinstance(error, socket.timeout)
            if (abort is not None and abort.fired) or attempt > self._retries or (sent and not safe):
                raise NetworkError(f"punctual did not answer {method} {path}: {failure}", attempt, timed_out) from failure
            time.sleep(self._retry_delay * 2 ** (attempt - 1))
        if not json_answer and status < 300:
            return status, text
        decoded = json.loads(text) if text else None
        if status >= 300:
            raise api_error(status, decoded if isinstance(decoded, dict) else {"message": f"punctual answered {status}: {text[:200]}"})
        return status, decoded

    def _send(
        self, method: str, path: str, data: Optional[bytes], timeout: float, abort: Optional[Abort], extra: Optional[Mapping[str, str]]
    ) -> Tuple[int, str]:
        kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        connection = kind(self._host, self._port, timeout=timeout)
        headers = {**self._headers, **(extra or {})}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if abort is not None:
            abort._hold(connection)
        try:
            connection.connect()
            # After the socket exists: a fire() from now on shuts it down, one before is seen here.
            if abort is not None and abort.fired:
                raise ConnectionAbortedError("given up")
            connection.request(method, self._prefix + path, body=data, headers=headers)
            response = connection.getresponse()
            return response.status, response.read().decode("utf-8")
        finally:
            if abort is not None:
                abort._hold(None)
            connection.close()
