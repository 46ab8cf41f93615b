package punctual

// The shop's side of punctual's webhook: is this call from punctual, for this request, and fresh?
//
// punctual signs every call: X-Punctual-Signature: t=<epoch ms>,v2=<hex>[,v2=<hex>], one v2 per
// key it holds for the receiving host (two while a key rotation is under way). The signed text is
// five lines joined by "\n": t, the method, the full URL punctual called (as the WHATWG URL parser
// writes it, without #fragment or an empty "?"), the Idempotency-Key, and the hex SHA-256 of the
// raw body. A call passes when its t is within Tolerance of now (either way: clocks differ) and
// some v2 is the HMAC-SHA256 of that text under a secret held here, compared in constant time.
// Replays within the window are the receiver's to drop, by the Idempotency-Key it has handled.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Why a webhook call was refused (WebhookError.Reason).
const (
	ReasonMalformed = "malformed" // no usable X-Punctual-Signature
	ReasonExpired   = "expired"   // its time is outside the tolerance
	ReasonSignature = "signature" // no signature matches a secret held here
)

// WebhookError is a webhook call that must not be trusted; Reason says why, for the receiver's log.
type WebhookError struct {
	Reason  string
	Message string
}

func (e *WebhookError) Error() string {
	return "punctual webhook refused (" + e.Reason + "): " + e.Message
}

// WebhookVerifier checks the calls punctual makes to a shop's receiver.
type WebhookVerifier struct {
	// Secrets are WEBHOOK_SECRET (or the receiving host's key), and the next one during a rotation.
	Secrets []string
	// Tolerance is how far the signature's time may be from now (default 5 minutes).
	Tolerance time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

var (
	stampPattern  = regexp.MustCompile(`^\d{1,16}$`)
	digestPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
	urlPattern    = regexp.MustCompile(`(?s)^([A-Za-z][A-Za-z0-9+.-]*)://([^/?]*)(.*)$`)
)

// Verify checks one call: its method, the full URL punctual called, the raw body as it arrived,
// and its X-Punctual-Signature and Idempotency-Key headers. A refusal is a *WebhookError.
func (v *WebhookVerifier) Verify(method, url string, body []byte, signature, idempotencyKey string) error {
	stamp, digests, err := parseSignature(signature)
	if err != nil {
		return err
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	tolerance := v.Tolerance
	if tolerance <= 0 {
		tolerance = 5 * time.Minute
	}
	at, _ := strconv.ParseInt(stamp, 10, 64)
	offBy := now().UnixMilli() - at
	if offBy < 0 {
		offBy = -offBy
	}
	if offBy > tolerance.Milliseconds() {
		return &WebhookError{ReasonExpired, fmt.Sprintf("the signature's time is %d ms from now (tolerance %d ms)", offBy, tolerance.Milliseconds())}
	}
	bodyHash := sha256.Sum256(body)
	signed := strings.Join([]string{stamp, strings.ToUpper(method), CanonicalURL(url), idempotencyKey, hex.EncodeToString(bodyHash[:])}, "\n")
	held := 0
	for _, secret := range v.Secrets {
		if secret == "" {
			continue
		}
		held++
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(signed))
		expected := []byte(hex.EncodeToString(mac.Sum(nil)))
		for _, digest := range digests {
			if hmac.Equal(expected, []byte(digest)) {
				return nil
			}
		}
	}
	if held == 0 {
		return &WebhookError{ReasonSignature, "the verifier holds no secret (WEBHOOK_SECRET)"}
	}
	return &WebhookError{ReasonSignature, "no v2 signature matches a secret held here"}
}

// VerifyRequest checks the request a receiver is serving and answers its raw body, to decode once
// trusted. The URL is the request's own (the scheme from its TLS, the Host header, the request
// target as it arrived: RequestURI, never decoded), or publicBaseURL (e.g. https://shop.example) with the request target,
// behind a proxy that ends TLS or changes the Host. It reads r.Body.
func (v *WebhookVerifier) VerifyRequest(r *http.Request, publicBaseURL string) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	target := r.RequestURI
	if !strings.HasPrefix(target, "/") {
		// The absolute form (a request through a forward proxy): its path and query.
		if _, rest, found := strings.Cut(target, "://"); found {
			if slash := strings.Index(rest, "/"); slash >= 0 {
				target = rest[slash:]
			} else {
				target = "/"
			}
		}
	}
	base := publicBaseURL
	if base == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	url := strings.TrimRight(base, "/") + target
	return body, v.Verify(r.Method, url, body, r.Header.Get("X-Punctual-Signature"), r.Header.Get("Idempotency-Key"))
}

// CanonicalURL writes a URL as punctual signs it, for the forms a receiver may hold that the
// WHATWG parser writes otherwise: the scheme and host in lower case, the default port (80, 443)
// dropped, an empty path as "/", no fragment, no empty query. The path and query are left as
// given: pass them as they arrived, not decoded.
func CanonicalURL(url string) string {
	url, _, _ = strings.Cut(url, "#")
	parts := urlPattern.FindStringSubmatch(url)
	if parts == nil {
		return url
	}
	scheme, host, rest := strings.ToLower(parts[1]), strings.ToLower(parts[2]), parts[3]
	if (scheme == "http" && strings.HasSuffix(host, ":80")) || (scheme == "https" && strings.HasSuffix(host, ":443")) {
		host = host[:strings.LastIndex(host, ":")]
	}
	if rest == "" || strings.HasPrefix(rest, "?") {
		rest = "/" + rest
	}
	if strings.HasSuffix(rest, "?") && strings.Count(rest, "?") == 1 {
		rest = strings.TrimSuffix(rest, "?") // an empty query is not sent, so not signed
	}
	return scheme + "://" + host + rest
}

func parseSignature(header string) (string, []string, error) {
	stamp := ""
	var digests []string
	for _, part := range strings.Split(header, ",") {
		name, value, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case name == "t" && stamp == "" && stampPattern.MatchString(value):
			stamp = value
		case name == "v2" && digestPattern.MatchString(value):
			digests = append(digests, value)
		}
	}
	if stamp == "" || len(digests) == 0 {
		return "", nil, &WebhookError{ReasonMalformed, "X-Punctual-Signature is missing or is not t=<epoch ms>,v2=<hex>"}
	}
	return stamp, digests, nil
}
