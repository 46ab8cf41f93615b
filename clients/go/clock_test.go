package punctual_test

import (
	"context"
	"errors"
	"testing"
	"time"

	punctual "github.com/punctual/punctual/clients/go"
)

func clockClient() *punctual.Client {
	return punctual.NewClient(env("PUNCTUAL_TEST_CLOCK_URL"), punctual.WithToken(env("PUNCTUAL_TOKEN")))
}

func TestAdvanceRunsTheCloseDueIn30Minutes(t *testing.T) {
	ctx := context.Background()
	c := clockClient()
	task, _, err := c.Create(ctx, punctual.NewTask{Type: "close_order", Payload: map[string]any{"orderSn": "GO-SN-30"}, Delay: 30 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	moved, err := c.Advance(ctx, 29*time.Minute, punctual.ClockMove{})
	if err != nil || moved.Settled == nil || !*moved.Settled {
		t.Fatalf("advance 29 minutes: %+v, %v", moved, err)
	}
	if got, _ := c.Get(ctx, task.ID); got.Status != "pending" {
		t.Fatalf("after 29 minutes: %s, want pending", got.Status)
	}
	if _, err := c.Advance(ctx, time.Minute, punctual.ClockMove{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Get(ctx, task.ID); got.Status != "done" {
		t.Fatalf("after 30 minutes: %s, want done", got.Status)
	}
}

func TestSetTimeMovesForwardOnly(t *testing.T) {
	ctx := context.Background()
	c := clockClient()
	now, err := c.Clock(ctx)
	if err != nil || !now.TestClock {
		t.Fatalf("clock: %+v, %v", now, err)
	}
	to := now.Time().Add(time.Hour)
	moved, err := c.SetTime(ctx, to, punctual.ClockMove{})
	if err != nil || moved.NowMs != to.UnixMilli() {
		t.Fatalf("set time: %+v, %v", moved, err)
	}
	if _, err := c.SetTime(ctx, now.Time(), punctual.ClockMove{}); !errors.Is(err, punctual.ErrBadRequest) {
		t.Fatalf("a move back: %v, want ErrBadRequest", err)
	}
	if _, err := newClient().Clock(ctx); !errors.Is(err, punctual.ErrNotFound) {
		t.Fatalf("a service without the test clock: %v, want ErrNotFound", err)
	}
}
