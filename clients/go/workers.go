package punctual

// The pull workers' routes (a token of the worker role): lease due tasks of worker types, and
// settle each leased task by its lease token: extend, ack (one or many), nack.

import (
	"context"
	"encoding/json"
	"time"
)

// LeasedTask is a task of a worker type leased to this worker. Attempt is 1 on the first run;
// IdempotencyKey stays the same across all its attempts; LeaseToken is what Ack, Nack and Extend
// must name. Traceparent and Tracestate are the W3C trace context of this run, in the trace of
// the create that made the task ("" when it was created without one): start your span as a
// child of this, and the work shows up in the shop's trace.
type LeasedTask struct {
	ID             int64           `json:"id"`
	Key            *string         `json:"key"`
	Type           string          `json:"type"`
	Payload        json.RawMessage `json:"payload"`
	RunAt          time.Time       `json:"runAt"`
	RunAtLocal     time.Time       `json:"runAtLocal"`
	Timezone       string          `json:"timezone"`
	Attempt        int             `json:"attempt"`
	MaxAttempts    int             `json:"maxAttempts"`
	LeaseToken     string          `json:"leaseToken"`
	LeaseUntil     time.Time       `json:"leaseUntil"`
	IdempotencyKey string          `json:"idempotencyKey"`
	Traceparent    string          `json:"traceparent"`
	Tracestate     string          `json:"tracestate"`
}

// DecodePayload decodes the task's payload into v.
func (t *LeasedTask) DecodePayload(v any) error { return json.Unmarshal(t.Payload, v) }

// LeaseRequest asks for up to Max (1–100, default 1) due tasks of Types, leased for Lease
// (default 30 s), waiting up to Wait (at most 30 s) for one to fall due.
type LeaseRequest struct {
	Types []string
	Max   int
	Lease time.Duration
	Wait  time.Duration
}

// Lease leases due tasks of worker types; with Wait, the request waits until one falls due or
// Wait passes (then none). Cancelling ctx gives up the wait.
func (c *Client) Lease(ctx context.Context, r LeaseRequest) ([]LeasedTask, error) {
	body := map[string]any{"types": r.Types, "max": 1, "leaseMs": int64(30_000), "waitMs": r.Wait.Milliseconds()}
	if r.Max > 0 {
		body["max"] = r.Max
	}
	if r.Lease > 0 {
		body["leaseMs"] = r.Lease.Milliseconds()
	}
	var answer struct {
		Tasks []LeasedTask `json:"tasks"`
	}
	// A lost answer may have leased tasks: they come back when the lease runs out, so a retry is harmless.
	if _, err := c.call(ctx, "POST", "/workers/lease", body, &answer, true, r.Wait); err != nil {
		return nil, err
	}
	return answer.Tasks, nil
}

// Extend makes the task's lease run for lease from now.
func (c *Client) Extend(ctx context.Context, task *LeasedTask, lease time.Duration) (*Task, error) {
	body := map[string]any{"leaseToken": task.LeaseToken, "leaseMs": lease.Milliseconds()}
	return c.task(ctx, "POST", taskPath(task.ID)+"/extend", body, true)
}

// Ack marks the leased task done; ErrConflict when the lease is not this token's any more.
func (c *Client) Ack(ctx context.Context, task *LeasedTask) (*Task, error) {
	return c.task(ctx, "POST", taskPath(task.ID)+"/ack", map[string]any{"leaseToken": task.LeaseToken}, false)
}

// AckItem is one ack's answer in AckAll: 200 done, 404 no such task, 409 not leased to this token.
type AckItem struct {
	ID      int64  `json:"id"`
	Status  int    `json:"status"`
	Message string `json:"message,omitempty"`
}

// AckAllResult answers AckAll: one item per task, in order, and how many were acked.
type AckAllResult struct {
	Results []AckItem `json:"results"`
	Acked   int       `json:"acked"`
	Refused int       `json:"refused"`
}

// AckAll marks several leased tasks done in one request (up to 1,000); a refused one refuses only itself.
func (c *Client) AckAll(ctx context.Context, tasks []LeasedTask) (*AckAllResult, error) {
	acks := make([]map[string]any, len(tasks))
	for i, task := range tasks {
		acks[i] = map[string]any{"id": task.ID, "leaseToken": task.LeaseToken}
	}
	var result AckAllResult
	if _, err := c.call(ctx, "POST", "/workers/ack", map[string]any{"acks": acks}, &result, false, 0); err != nil {
		return nil, err
	}
	return &result, nil
}

// NackOptions: RetryAt (any form the API takes) instead of the backoff; Permanent fails the task
// for good.
type NackOptions struct {
	RetryAt   string
	Permanent bool
}

// Nack says the leased task failed, with reason kept as its lastError: it is tried again with the
// backoff (or at RetryAt), or failed for good when Permanent or on its last attempt.
func (c *Client) Nack(ctx context.Context, task *LeasedTask, reason string, opts NackOptions) (*Task, error) {
	if runes := []rune(reason); len(runes) > 2000 {
		reason = string(runes[:2000])
	}
	body := map[string]any{"leaseToken": task.LeaseToken, "error": reason}
	setString(body, "retryAt", opts.RetryAt)
	if opts.Permanent {
		body["permanent"] = true
	}
	return c.task(ctx, "POST", taskPath(task.ID)+"/nack", body, false)
}

// Workers reads the worker types with their leased, pending and failed tasks, and the lease
// requests waiting in the answering process, as the API's JSON.
func (c *Client) Workers(ctx context.Context) (map[string]any, error) {
	var workers map[string]any
	if _, err := c.call(ctx, "GET", "/workers", nil, &workers, true, 0); err != nil {
		return nil, err
	}
	return workers, nil
}
