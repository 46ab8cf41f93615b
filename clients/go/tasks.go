package punctual

// The task routes: create (one or a batch), read, cancel, move, retry, edit, delete, and the
// pending tasks a page at a time. Types follow the API's JSON; times are time.Time (RunAt in UTC,
// RunAtLocal with the offset of the task's zone), a field the API may send as null is a pointer.

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"time"
)

// Status is a task's state.
type Status string

const (
	StatusPending   Status = "pending"
	StatusRunning   Status = "running"
	StatusDone      Status = "done"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
	StatusSkipped   Status = "skipped"
)

// Task is a task as the service answers it.
type Task struct {
	ID                int64           `json:"id"`
	Key               *string         `json:"key"`
	Type              string          `json:"type"`
	Payload           json.RawMessage `json:"payload"`
	Status            Status          `json:"status"`
	RunAt             time.Time       `json:"runAt"`
	RunAtLocal        time.Time       `json:"runAtLocal"`
	Timezone          string          `json:"timezone"`
	Attempts          int             `json:"attempts"`
	MaxAttempts       int             `json:"maxAttempts"`
	Misfire           string          `json:"misfire"`
	LastError         *string         `json:"lastError"`
	CreatedAt         time.Time       `json:"createdAt"`
	UpdatedAt         time.Time       `json:"updatedAt"`
	FinishedAt        *time.Time      `json:"finishedAt"`
	Cron              *string         `json:"cron"`
	SeriesID          *int64          `json:"seriesId"`
	Tags              []string        `json:"tags"`
	Priority          int             `json:"priority"`
	ExpireAfterMs     *int64          `json:"expireAfterMs"`
	Group             *string         `json:"group"`
	LastResult        *string         `json:"lastResult"`        // what the latest successful run's handler answered
	LatenessMs        *int64          `json:"latenessMs"`        // how late the latest run started, of what punctual controls
	LastHTTPStatus    *int            `json:"lastHttpStatus"`    // a webhook run: the latest HTTP status (0: no answer)
	LastDurationMs    *int64          `json:"lastDurationMs"`    // a webhook run: how long the latest run took
	LastResponseBytes *int64          `json:"lastResponseBytes"` // a webhook run: the latest answer's body size
}

// DecodePayload decodes the task's payload into v.
func (t *Task) DecodePayload(v any) error { return json.Unmarshal(t.Payload, v) }

// NewTask is a task to create. Give at most one of RunAt and At; without either the task runs
// Delay from now (zero: now), or with Cron at its next match.
type NewTask struct {
	Type    string
	Payload any // marshalled as a JSON object; nil is {}
	// RunAt is any form the API takes: ISO-8601 with an offset ("2026-12-01T10:00:00+08:00") or a
	// naive local time ("2026-12-01 10:00:00", read in Timezone, else the service's TIMEZONE).
	RunAt         string
	At            time.Time     // an instant, instead of RunAt
	Delay         time.Duration // from now, instead of RunAt and At
	Timezone      string        // IANA zone for a naive RunAt, and the task's zone
	Key           string        // dedup key: the same create again never makes a second task
	MaxAttempts   int
	Misfire       string // "run" (default) or "skip"
	Cron          string // five cron fields: a recurring task
	Tags          []string
	Priority      int           // -10 to 10
	OnKeyConflict string        // "replace": a repeat with other content updates a pending task
	MaxDelay      time.Duration // with replace: never moved more than this past its first runAt (0: no cap)
	ExpireAfter   time.Duration // never started later than this after its runAt (0: no limit)
	Spread        time.Duration // run at runAt + hash(key) mod Spread
	Group         string
}

// MarshalJSON writes the body of POST /tasks.
func (t NewTask) MarshalJSON() ([]byte, error) {
	if t.RunAt != "" && !t.At.IsZero() {
		return nil, errors.New("punctual: give RunAt or At, not both")
	}
	body := map[string]any{"type": t.Type, "payload": t.Payload}
	if t.Payload == nil {
		body["payload"] = map[string]any{}
	}
	switch {
	case t.RunAt != "":
		body["runAt"] = t.RunAt
	case !t.At.IsZero():
		body["runAt"] = Instant(t.At)
	case t.Cron == "" || t.Delay > 0:
		body["delayMs"] = t.Delay.Milliseconds()
	}
	setString(body, "timezone", t.Timezone)
	setString(body, "key", t.Key)
	setString(body, "misfire", t.Misfire)
	setString(body, "cron", t.Cron)
	setString(body, "onKeyConflict", t.OnKeyConflict)
	setString(body, "group", t.Group)
	if t.MaxAttempts > 0 {
		body["maxAttempts"] = t.MaxAttempts
	}
	if len(t.Tags) > 0 {
		body["tags"] = t.Tags
	}
	if t.Priority != 0 {
		body["priority"] = t.Priority
	}
	setMillis(body, "maxDelayMs", t.MaxDelay)
	setMillis(body, "expireAfterMs", t.ExpireAfter)
	setMillis(body, "spreadMs", t.Spread)
	return json.Marshal(body)
}

// Instant writes t as the API takes an instant: ISO-8601 with its offset, to the millisecond.
func Instant(t time.Time) string { return t.Format("2006-01-02T15:04:05.000Z07:00") }

func setString(body map[string]any, name, value string) {
	if value != "" {
		body[name] = value
	}
}

func setMillis(body map[string]any, name string, value time.Duration) {
	if value > 0 {
		body[name] = value.Milliseconds()
	}
}

// Create schedules a task. created is false when Key named a task with the same content (a
// create sent again): that task comes back. A key taken by other content is an *APIError that
// errors.Is(err, ErrConflict), with the existing task. The caller's trace context goes with it
// (WithTrace on ctx, else the client's WithTraceContext).
func (c *Client) Create(ctx context.Context, task NewTask) (*Task, bool, error) {
	var made Task
	// With a key, a second send finds the task the first one made: safe to repeat.
	status, err := c.callWith(ctx, "POST", "/tasks", task, &made, task.Key != "", 0, c.traceHeaders(ctx))
	if err != nil {
		return nil, false, err
	}
	return &made, status == 201, nil
}

// BatchItem is one item's answer in a batch: the status a create would get (201, 200, 409, 400),
// the task's id (none for a 400), and for a refusal the code and message.
type BatchItem struct {
	Status  int     `json:"status"`
	ID      *int64  `json:"id,omitempty"`
	Key     *string `json:"key,omitempty"`
	Code    string  `json:"code,omitempty"`
	Message string  `json:"message,omitempty"`
}

// BatchResult answers CreateMany: one item per task, in order, and how many of each.
type BatchResult struct {
	Results  []BatchItem `json:"results"`
	Created  int         `json:"created"`
	Repeated int         `json:"repeated"`
	Refused  int         `json:"refused"`
}

// CreateMany schedules up to 1,000 tasks in one request; each is answered as Create would be,
// and a bad one refuses only itself. The trace context goes with it as with Create.
func (c *Client) CreateMany(ctx context.Context, tasks []NewTask) (*BatchResult, error) {
	keyed := len(tasks) > 0
	for _, task := range tasks {
		keyed = keyed && task.Key != ""
	}
	var result BatchResult
	if _, err := c.callWith(ctx, "POST", "/tasks/batch", map[string]any{"tasks": tasks}, &result, keyed, 0, c.traceHeaders(ctx)); err != nil {
		return nil, err
	}
	return &result, nil
}

func (c *Client) task(ctx context.Context, method, path string, body any, safe bool) (*Task, error) {
	var task Task
	if _, err := c.call(ctx, method, path, body, &task, safe, 0); err != nil {
		return nil, err
	}
	return &task, nil
}

func taskPath(id int64) string  { return "/tasks/" + strconv.FormatInt(id, 10) }
func keyPath(key string) string { return "/tasks/by-key/" + url.PathEscape(key) }

// Get reads a task by its id.
func (c *Client) Get(ctx context.Context, id int64) (*Task, error) {
	return c.task(ctx, "GET", taskPath(id), nil, true)
}

// GetByKey reads a task by its key.
func (c *Client) GetByKey(ctx context.Context, key string) (*Task, error) {
	return c.task(ctx, "GET", keyPath(key), nil, true)
}

// Cancel cancels a pending task; ErrConflict (with the task) when it is not pending any more.
func (c *Client) Cancel(ctx context.Context, id int64) (*Task, error) {
	return c.task(ctx, "POST", taskPath(id)+"/cancel", nil, false)
}

// CancelByKey cancels by key, what a shop does when the order is paid: ErrConflict means the
// task already ran (check the order), ErrNotFound that there never was one.
func (c *Client) CancelByKey(ctx context.Context, key string) (*Task, error) {
	return c.task(ctx, "POST", keyPath(key)+"/cancel", nil, false)
}

// When is a new time for Reschedule and Retry: RunAt (any form the API takes, a naive one read in
// Timezone, else the task's zone), At (an instant), or Delay from now.
type When struct {
	RunAt    string
	At       time.Time
	Delay    time.Duration
	Timezone string
}

func (w When) body() map[string]any {
	body := map[string]any{}
	switch {
	case w.RunAt != "":
		body["runAt"] = w.RunAt
	case !w.At.IsZero():
		body["runAt"] = Instant(w.At)
	default:
		body["delayMs"] = w.Delay.Milliseconds()
	}
	setString(body, "timezone", w.Timezone)
	return body
}

// Reschedule moves a pending task.
func (c *Client) Reschedule(ctx context.Context, id int64, to When) (*Task, error) {
	return c.task(ctx, "POST", taskPath(id)+"/reschedule", to.body(), false)
}

// Retry runs a failed task again at the time given (the zero When: now); its attempts start over.
func (c *Client) Retry(ctx context.Context, id int64, at When) (*Task, error) {
	return c.task(ctx, "POST", taskPath(id)+"/retry", at.body(), false)
}

// EditPayload replaces a pending task's payload.
func (c *Client) EditPayload(ctx context.Context, id int64, payload any) (*Task, error) {
	return c.task(ctx, "PUT", taskPath(id)+"/payload", map[string]any{"payload": payload}, false)
}

// Delete deletes a task that is not running, with its runs; it answers the task as it was.
func (c *Client) Delete(ctx context.Context, id int64) (*Task, error) {
	return c.task(ctx, "DELETE", taskPath(id), nil, false)
}

// PendingQuery selects pending tasks: by Type, Tag or KeyPrefix, Limit a page (1–1000, default
// 100), from Cursor (the previous page's NextCursor).
type PendingQuery struct {
	Type      string
	Tag       string
	KeyPrefix string
	Limit     int
	Cursor    string
}

// PendingPage is one page of pending tasks, soonest first; NextCursor is nil on the last page.
type PendingPage struct {
	Tasks      []Task  `json:"tasks"`
	NextCursor *string `json:"nextCursor"`
}

// Pending reads one page of pending tasks.
func (c *Client) Pending(ctx context.Context, q PendingQuery) (*PendingPage, error) {
	query := url.Values{}
	for name, value := range map[string]string{"type": q.Type, "tag": q.Tag, "keyPrefix": q.KeyPrefix, "cursor": q.Cursor} {
		if value != "" {
			query.Set(name, value)
		}
	}
	if q.Limit > 0 {
		query.Set("limit", strconv.Itoa(q.Limit))
	}
	path := "/tasks/pending"
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	var page PendingPage
	if _, err := c.call(ctx, "GET", path, nil, &page, true, 0); err != nil {
		return nil, err
	}
	return &page, nil
}

// AllPending calls fn with every pending task the query selects, soonest first, a page (one
// request, Limit tasks, 500 when not set) at a time. An error from fn stops it and is returned.
func (c *Client) AllPending(ctx context.Context, q PendingQuery, fn func(*Task) error) error {
	if q.Limit == 0 {
		q.Limit = 500
	}
	for {
		page, err := c.Pending(ctx, q)
		if err != nil {
			return err
		}
		for i := range page.Tasks {
			if err := fn(&page.Tasks[i]); err != nil {
				return err
			}
		}
		if page.NextCursor == nil {
			return nil
		}
		q.Cursor = *page.NextCursor
	}
}

// Runs reads a task's runs, one per attempt, newest first, as the API's JSON:
// {"runs": [...], "nextCursor": ...}.
func (c *Client) Runs(ctx context.Context, id int64, limit int, cursor string) (map[string]any, error) {
	query := url.Values{}
	if limit > 0 {
		query.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		query.Set("cursor", cursor)
	}
	path := taskPath(id) + "/runs"
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	var runs map[string]any
	if _, err := c.call(ctx, "GET", path, nil, &runs, true, 0); err != nil {
		return nil, err
	}
	return runs, nil
}

// Healthy reports whether the process answers at all (/healthz).
func (c *Client) Healthy(ctx context.Context) (bool, error) {
	var health struct {
		Status string `json:"status"`
	}
	if _, err := c.call(ctx, "GET", "/healthz", nil, &health, true, 0); err != nil {
		return false, err
	}
	return health.Status == "ok", nil
}

// Ready reports whether the service armed its timers and its database answers (/readyz); its
// 503 is false, not an error.
func (c *Client) Ready(ctx context.Context) (bool, error) {
	_, err := c.call(ctx, "GET", "/readyz", nil, nil, true, 0)
	if errors.Is(err, ErrUnavailable) {
		return false, nil
	}
	return err == nil, err
}
