"""The shop's side of punctual's webhook: is this call from punctual, for this request, and fresh?

punctual signs every call: `X-Punctual-Signature: t=<epoch ms>,v2=<hex>[,v2=<hex>]`, one `v2` per
key it holds for the receiving host (two while a key rotation is under way). The signed text is
five lines joined by "\\n": `t`, the method, the full URL punctual called (as the WHATWG URL
parser writes it, without #fragment or an empty `?`), the Idempotency-Key, and the hex SHA-256 of
the raw body. A call passes when its `t` is within `tolerance_ms` of now (either way: clocks
differ) and some `v2` is the HMAC-SHA256 of that text under a secret held here, compared in
constant time.

The URL is the one part a receiver must rebuild rather than read: in Django
`request.build_absolute_uri()`, in FastAPI/Starlette `str(request.url)`; behind a proxy, the
public scheme and host with the request's path and query. Replays within the window are the
receiver's to drop, by the Idempotency-Key it has already handled.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from typing import Callable, Optional, Sequence, Union

from .errors import WebhookVerificationError

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://([^/?]*)(.*)$", re.DOTALL)
_STAMP = re.compile(r"^\d{1,16}$")
_DIGEST = re.compile(r"^[0-9a-f]{64}$")


def canonical_url(url: str) -> str:
    """The URL as punctual writes it into the signed text, for the forms a receiver may hold that
    the WHATWG parser would write otherwise: the scheme and host in lower case, the default port
    (80, 443) dropped, an empty path as `/`, no fragment, no empty query. The path and query are
    left as given: pass them as they arrived, not decoded."""
    url = url.split("#", 1)[0]
    match = _URL.match(url)
    if match is None:
        return url
    scheme, host, rest = match.group(1).lower(), match.group(2).lower(), match.group(3)
    if (scheme == "http" and host.endswith(":80")) or (scheme == "https" and host.endswith(":443")):
        host = host[: host.rindex(":")]
    if rest == "" or rest.startswith("?"):
        rest = "/" + rest
    if rest.endswith("?") and rest.count("?") == 1:
        rest = rest[:-1]  # an empty query is not sent, so not signed
    return f"{scheme}://{host}{rest}"


class WebhookVerifier:
    def __init__(self, secrets: Union[str, Sequence[str]], *, tolerance_ms: int = 300_000, clock: Optional[Callable[[], float]] = None) -> None:
        """`secrets`: WEBHOOK_SECRET (or the receiving host's key), and the next one during a
        rotation; `tolerance_ms`: how far `t` may be from now; `clock`: now in epoch seconds (tests)."""
        held = [secrets] if isinstance(secrets, str) else list(secrets)
        self._secrets = [secret.encode("utf-8") for secret in held if secret]
        if not self._secrets:
            raise ValueError("WebhookVerifier needs at least one secret (WEBHOOK_SECRET)")
        self._tolerance_ms = tolerance_ms
        self._clock = clock or time.time

    def verify(self, raw_body: Union[bytes, str], signature: Optional[str], method: str, url: str, idempotency_key: Optional[str]) -> None:
        """Raises WebhookVerificationError (with its `reason`) when the call must not be trusted.
        `raw_body` is the body exactly as it arrived; `url` the full URL punctual called."""
        stamp, digests = self._parse(signature)
        off_by = abs(int(self._clock() * 1000) - int(stamp))
        if off_by > self._tolerance_ms:
            raise WebhookVerificationError(
                WebhookVerificationError.EXPIRED, f"the signature's time is {off_by} ms from now (tolerance {self._tolerance_ms} ms)"
            )
        body = raw_body.encode("utf-8") if isinstance(raw_body, str) else raw_body
        signed = "\n".join([stamp, method.upper(), canonical_url(url), idempotency_key or "", hashlib.sha256(body).hexdigest()])
        for secret in self._secrets:
            expected = hmac.new(secret, signed.encode("utf-8"), hashlib.sha256).hexdigest()
            if any(hmac.compare_digest(expected, digest) for digest in digests):
                return
        raise WebhookVerificationError(WebhookVerificationError.SIGNATURE, "no v2 signature matches a secret held here")

    def is_valid(self, raw_body: Union[bytes, str], signature: Optional[str], method: str, url: str, idempotency_key: Optional[str]) -> bool:
        """verify() as a yes or no."""
        try:
            self.verify(raw_body, signature, method, url, idempotency_key)
            return True
        except WebhookVerificationError:
            return False

    @staticmethod
    def _parse(header: Optional[str]) -> tuple[str, list[str]]:
        stamp: Optional[str] = None
        digests: list[str] = []
        for part in (header or "").split(","):
            name, _, value = part.strip().partition("=")
            if name == "t" and stamp is None and _STAMP.match(value):
                stamp = value
            elif name == "v2" and _DIGEST.match(value):
                digests.append(value)
        if stamp is None or not digests:
            raise WebhookVerificationError(WebhookVerificationError.MALFORMED, "X-Punctual-Signature is missing or is not t=<epoch ms>,v2=<hex>")
        return stamp, digests
