"""WebhookVerifier's refusals that need no service: a signature outside the time window, a
malformed header, and the URL forms a receiver may hold that punctual signs in WHATWG form. The
conformance case `webhook signature` checks it against real calls."""

from __future__ import annotations

import hashlib
import hmac
import unittest

from punctual import WebhookVerificationError, WebhookVerifier, canonical_url

SECRET = "a-receiver-secret"
NOW_MS = 1_796_000_000_000


def signed(body: str, url: str, at_ms: int = NOW_MS, key: str = "punctual-42-1796000000000") -> str:
    text = "\n".join([str(at_ms), "POST", url, key, hashlib.sha256(body.encode()).hexdigest()])
    return f"t={at_ms},v2=" + hmac.new(SECRET.encode(), text.encode(), hashlib.sha256).hexdigest()


class WebhookVerifierTest(unittest.TestCase):
    def verifier(self) -> WebhookVerifier:
        return WebhookVerifier([SECRET], clock=lambda: NOW_MS / 1000)

    def reason(self, signature: str, url: str = "https://shop.example/hook") -> str:
        with self.assertRaises(WebhookVerificationError) as refused:
            self.verifier().verify('{"a":1}', signature, "POST", url, "punctual-42-1796000000000")
        return refused.exception.reason

    def test_accepts_a_call_signed_now_and_one_at_the_edge_of_the_window(self) -> None:
        for at in (NOW_MS, NOW_MS - 300_000, NOW_MS + 300_000):
            self.assertTrue(self.verifier().is_valid('{"a":1}', signed('{"a":1}', "https://shop.example/hook", at), "post", "https://shop.example/hook", "punctual-42-1796000000000"))

    def test_refuses_a_call_outside_the_window_as_expired(self) -> None:
        self.assertEqual("expired", self.reason(signed('{"a":1}', "https://shop.example/hook", NOW_MS - 300_001)))

    def test_refuses_a_header_without_a_time_or_a_v2_as_malformed(self) -> None:
        for header in ("", "t=1", "v2=" + "0" * 64, "t=x,v2=" + "0" * 64, "t=1,v1=" + "0" * 64):
            self.assertEqual("malformed", self.reason(header), header)

    def test_refuses_a_signature_made_with_another_secret(self) -> None:
        forged = signed('{"a":1}', "https://shop.example/hook").split("v2=")[0] + "v2=" + "f" * 64
        self.assertEqual("signature", self.reason(forged))

    def test_writes_the_url_as_punctual_signs_it(self) -> None:
        self.assertEqual("https://shop.example/hook?x=1", canonical_url("HTTPS://Shop.Example:443/hook?x=1#part"))
        self.assertEqual("http://shop.example/", canonical_url("http://shop.example:80"))
        self.assertEqual("http://shop.example:8080/a", canonical_url("http://shop.example:8080/a?"))
        self.assertEqual("http://shop.example/?q=a%20b", canonical_url("http://shop.example?q=a%20b"))

    def test_needs_a_secret(self) -> None:
        with self.assertRaises(ValueError):
            WebhookVerifier(["", ""])


if __name__ == "__main__":
    unittest.main()
