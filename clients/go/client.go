package punctual

// The HTTP side of the client: options, one call with its retries, and the decoding of answers
// and errors.
//
// What it decides:
//   - Every call takes a context: its cancellation or deadline ends the call, retries included.
//     A call gets the client's timeout (10 s) on top of the context, and a lease its wait as well.
//   - A call that certainly never reached the service (the connection was refused) is retried; a
//     call that may have reached it is retried only when sending it twice does no harm (a read, a
//     create with a key, a lease, an extend). The pause doubles from the retry delay.
//   - A Client is safe for use by several goroutines; it keeps net/http's connection pool.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// Client calls punctual's HTTP API. Make one with NewClient.
type Client struct {
	baseURL    string
	token      string
	http       *http.Client
	timeout    time.Duration
	retries    int
	retryDelay time.Duration
	// traceContext answers a create's trace context (WithTraceContext).
	traceContext func(ctx context.Context) TraceContext
}

// Option sets up a Client.
type Option func(*Client)

// WithToken sends API_TOKEN, or a token with a role, as the bearer token.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient uses this http.Client (its transport, proxy and TLS settings).
func WithHTTPClient(client *http.Client) Option { return func(c *Client) { c.http = client } }

// WithTimeout bounds each attempt of a call (default 10 s); a lease waits its wait on top.
func WithTimeout(timeout time.Duration) Option { return func(c *Client) { c.timeout = timeout } }

// WithRetries sets how many more attempts a call may make after a connection error (default 2),
// and the pause before the first (default 200 ms, doubling).
func WithRetries(retries int, delay time.Duration) Option {
	return func(c *Client) { c.retries, c.retryDelay = retries, delay }
}

// NewClient makes a client of the service at baseURL, e.g. http://127.0.0.1:3000.
func NewClient(baseURL string, opts ...Option) *Client {
	c := &Client{
		baseURL:    strings.TrimRight(baseURL, "/"),
		http:       http.DefaultClient,
		timeout:    10 * time.Second,
		retries:    2,
		retryDelay: 200 * time.Millisecond,
	}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// call sends one request and decodes the answer into out (when not nil); it answers the status.
// safe says whether the request may be sent again after it may have reached the service; extra
// lengthens the attempt's timeout (a lease's wait).
func (c *Client) call(ctx context.Context, method, path string, body, out any, safe bool, extra time.Duration) (int, error) {
	return c.callWith(ctx, method, path, body, out, safe, extra, nil)
}

// callWith is call with more request headers.
func (c *Client) callWith(ctx context.Context, method, path string, body, out any, safe bool, extra time.Duration, headers http.Header) (int, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return 0, fmt.Errorf("punctual: %s %s: %w", method, path, err)
		}
	}
	for attempt := 1; ; attempt++ {
		status, answer, err := c.send(ctx, method, path, payload, extra, headers)
		if err == nil {
			return status, decode(status, answer, out)
		}
		sent := !isRefused(err)
		if ctx.Err() != nil || attempt > c.retries || (sent && !safe) {
			return 0, fmt.Errorf("punctual: %s %s: %w", method, path, err)
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("punctual: %s %s: %w", method, path, ctx.Err())
		case <-time.After(c.retryDelay << (attempt - 1)):
		}
	}
}

func (c *Client) send(ctx context.Context, method, path string, payload []byte, extra time.Duration, headers http.Header) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout+extra)
	defer cancel()
	var reader io.Reader
	if payload != nil {
		reader = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, reader)
	if err != nil {
		return 0, nil, err
	}
	for name, values := range headers {
		req.Header[name] = values
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "punctual-go")
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, answer, nil
}

// isRefused reports an error after which the request certainly did not reach the service.
func isRefused(err error) bool {
	var dns *net.DNSError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &dns)
}

func decode(status int, answer []byte, out any) error {
	if status >= 300 {
		apiErr := &APIError{Status: status, Code: "UNKNOWN", Message: fmt.Sprintf("punctual answered %d", status)}
		var body struct {
			Code    string          `json:"code"`
			Message string          `json:"message"`
			Task    json.RawMessage `json:"task"`
		}
		if json.Unmarshal(answer, &body) == nil {
			_ = json.Unmarshal(answer, &apiErr.Body)
			if body.Code != "" {
				apiErr.Code = body.Code
			}
			if body.Message != "" {
				apiErr.Message = body.Message
			}
			if status == http.StatusConflict && len(body.Task) > 0 && string(body.Task) != "null" {
				var task Task
				if json.Unmarshal(body.Task, &task) == nil {
					apiErr.Task = &task
				}
			}
		} else if len(answer) > 0 {
			if len(answer) > 200 {
				answer = answer[:200]
			}
			apiErr.Message += ": " + string(answer)
		}
		return apiErr
	}
	if out == nil || len(answer) == 0 {
		return nil
	}
	if err := json.Unmarshal(answer, out); err != nil {
		return fmt.Errorf("punctual: the answer is not the JSON expected: %w", err)
	}
	return nil
}
