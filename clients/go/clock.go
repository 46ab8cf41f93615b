package punctual

import (
	"context"
	"time"
)

// TestClock is the test clock's time and, after a move, what ran on the way: a service started
// with `punctual start --test-clock` (TEST_CLOCK=on) has one; any other answers ErrNotFound.
type TestClock struct {
	TestClock bool   `json:"testClock"`
	Now       string `json:"now"`
	NowMs     int64  `json:"nowMs"`
	// After a move: every task due by now has finished (or is held: a paused type, a worker type).
	Settled *bool `json:"settled,omitempty"`
	// After a move: the due instants the clock stopped at on its way.
	Steps int `json:"steps,omitempty"`
	// After a move: the tasks still running when the wait ran out.
	Running []int64 `json:"running,omitempty"`
	// After a move: tasks due but held back.
	Held int `json:"held,omitempty"`
}

// Time is the test clock's time as a time.Time.
func (t *TestClock) Time() time.Time { return time.UnixMilli(t.NowMs).UTC() }

// ClockMove says how a move waits: how long for the tasks that fell due (0: the service's 10 s),
// and the zone of a naive local time given to SetTime.
type ClockMove struct {
	Wait     time.Duration
	Timezone string
}

// Clock reads the test clock.
func (c *Client) Clock(ctx context.Context) (*TestClock, error) {
	var out TestClock
	if _, err := c.call(ctx, "GET", "/test/clock", nil, &out, true, 0); err != nil {
		return nil, err
	}
	return &out, nil
}

// Advance moves the test clock d forward and returns once every task due on the way has run, in
// due order (retries whose backoff lands inside too).
func (c *Client) Advance(ctx context.Context, d time.Duration, opts ClockMove) (*TestClock, error) {
	return c.moveClock(ctx, map[string]any{"advanceMs": d.Milliseconds()}, opts)
}

// SetTime moves the test clock to at (never back), as Advance does.
func (c *Client) SetTime(ctx context.Context, at time.Time, opts ClockMove) (*TestClock, error) {
	return c.moveClock(ctx, map[string]any{"to": Instant(at)}, opts)
}

// SetLocalTime moves the test clock to a naive local time ("2030-12-01 10:00:00") read in
// opts.Timezone (else the service's TIMEZONE), as Advance does.
func (c *Client) SetLocalTime(ctx context.Context, local string, opts ClockMove) (*TestClock, error) {
	return c.moveClock(ctx, map[string]any{"to": local}, opts)
}

func (c *Client) moveClock(ctx context.Context, body map[string]any, opts ClockMove) (*TestClock, error) {
	wait := opts.Wait
	if wait <= 0 {
		wait = 10 * time.Second
	}
	body["waitMs"] = wait.Milliseconds()
	setString(body, "timezone", opts.Timezone)
	var out TestClock
	// Not safe to send twice: a move that reached the service and is sent again moves twice.
	if _, err := c.call(ctx, "POST", "/test/clock", body, &out, false, wait); err != nil {
		return nil, err
	}
	return &out, nil
}
