package punctual_test

// WebhookVerifier's refusals that need no service: a signature outside the time window, a
// malformed header, another secret, the URL forms a receiver may hold that punctual signs in
// WHATWG form, and VerifyRequest rebuilding the URL from the request. The conformance case
// "webhook signature" checks it against real calls.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	punctual "github.com/punctual/punctual/clients/go"
)

const (
	secret = "a-receiver-secret"
	nowMs  = int64(1_796_000_000_000)
	hookID = "punctual-42-1796000000000"
)

func sign(method, url, body string, atMs int64) string {
	bodyHash := sha256.Sum256([]byte(body))
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strings.Join([]string{fmt.Sprint(atMs), method, url, hookID, hex.EncodeToString(bodyHash[:])}, "\n")))
	return fmt.Sprintf("t=%d,v2=%s", atMs, hex.EncodeToString(mac.Sum(nil)))
}

func verifier() *punctual.WebhookVerifier {
	return &punctual.WebhookVerifier{Secrets: []string{"", secret}, Now: func() time.Time { return time.UnixMilli(nowMs) }}
}

func reason(err error) string {
	var refused *punctual.WebhookError
	if errors.As(err, &refused) {
		return refused.Reason
	}
	return fmt.Sprint(err)
}

func TestWebhookVerifierAcceptsACallWithinTheWindow(t *testing.T) {
	for _, at := range []int64{nowMs, nowMs - 300_000, nowMs + 300_000} {
		if err := verifier().Verify("post", "https://shop.example/hook", []byte(`{"a":1}`), sign("POST", "https://shop.example/hook", `{"a":1}`, at), hookID); err != nil {
			t.Fatalf("signed at %d: %v", at, err)
		}
	}
}

func TestWebhookVerifierRefusals(t *testing.T) {
	good := sign("POST", "https://shop.example/hook", `{"a":1}`, nowMs)
	for header, want := range map[string]string{
		sign("POST", "https://shop.example/hook", `{"a":1}`, nowMs-300_001): punctual.ReasonExpired,
		"":                                  punctual.ReasonMalformed,
		"t=1":                               punctual.ReasonMalformed,
		"t=x,v2=" + strings.Repeat("0", 64): punctual.ReasonMalformed,
		"t=1,v1=" + strings.Repeat("0", 64): punctual.ReasonMalformed,
		good[:strings.Index(good, "v2=")+3] + strings.Repeat("f", 64): punctual.ReasonSignature,
	} {
		err := verifier().Verify("POST", "https://shop.example/hook", []byte(`{"a":1}`), header, hookID)
		if got := reason(err); got != want {
			t.Errorf("%q: want %s, got %s", header, want, got)
		}
	}
}

func TestCanonicalURLIsWhatPunctualSigns(t *testing.T) {
	for given, want := range map[string]string{
		"HTTPS://Shop.Example:443/hook?x=1#part": "https://shop.example/hook?x=1",
		"http://shop.example:80":                 "http://shop.example/",
		"http://shop.example:8080/a?":            "http://shop.example:8080/a",
		"http://shop.example?q=a%20b":            "http://shop.example/?q=a%20b",
	} {
		if got := punctual.CanonicalURL(given); got != want {
			t.Errorf("%s: want %s, got %s", given, want, got)
		}
	}
}

func TestVerifyRequestRebuildsTheURLFromTheRequest(t *testing.T) {
	body := `{"orderSn":"SN1"}`
	// A request as a server sees it (the origin form) and as a forward proxy sends it (the absolute form).
	for _, target := range []string{"/hooks/close?shop=a%20b", "http://receiver.internal/hooks/close?shop=a%20b"} {
		for _, public := range []string{"", "https://shop.example"} {
			url := "http://receiver.internal/hooks/close?shop=a%20b"
			if public != "" {
				url = public + "/hooks/close?shop=a%20b"
			}
			request := httptest.NewRequest("POST", target, strings.NewReader(body))
			request.Host = "receiver.internal"
			request.Header.Set("X-Punctual-Signature", sign("POST", url, body, nowMs))
			request.Header.Set("Idempotency-Key", hookID)
			read, err := verifier().VerifyRequest(request, public)
			if err != nil || string(read) != body {
				t.Fatalf("%s, public %q: %v, body %q", target, public, err, read)
			}
		}
	}
}
