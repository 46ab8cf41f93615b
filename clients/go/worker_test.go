package punctual_test

// The Go worker loop against the real service, beyond what the conformance cases check: the
// lease extended while a handler runs longer than it, a cancelled context giving up a waiting
// lease at once, and a lost lease cancelling the handler's context.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	punctual "github.com/punctual/punctual/clients/go"
)

const (
	workerType = "go_worker_job"
	idleType   = "go_idle_job"
	lostType   = "go_lost_job"
)

func TestWorkerExtendsTheLeaseWhileTheHandlerRunsLongerThanIt(t *testing.T) {
	ctx := context.Background()
	client := newClient()
	made, _, err := client.Create(ctx, punctual.NewTask{Type: workerType, Payload: map[string]any{"do": "slow"}})
	if err != nil {
		t.Fatal(err)
	}
	run, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	var seen []punctual.LeasedTask
	worker := punctual.Worker{Client: client, Types: []string{workerType}, Lease: time.Second, Wait: 5 * time.Second,
		Handle: func(ctx context.Context, task *punctual.LeasedTask) error {
			// The 1 s lease would run out in here; a lease request meanwhile must not get the task.
			var err error
			seen, err = client.Lease(ctx, punctual.LeaseRequest{Types: []string{workerType}, Lease: time.Second, Wait: 3 * time.Second})
			stop()
			return err
		}}
	if err := worker.Run(run); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 0 {
		t.Fatalf("another lease got the task while its lease was extended: %+v", seen)
	}
	task, err := client.Get(ctx, made.ID)
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != punctual.StatusDone || task.Attempts != 1 {
		t.Fatalf("want done after 1 attempt, got %s after %d", task.Status, task.Attempts)
	}
}

func TestWorkerGivesUpAWaitingLeaseWhenItsContextIsCancelled(t *testing.T) {
	client := newClient()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := make(chan error, 1)
	go func() {
		ended <- (&punctual.Worker{Client: client, Types: []string{idleType}, Wait: 25 * time.Second,
			Handle: func(context.Context, *punctual.LeasedTask) error { return nil }}).Run(ctx)
	}()
	waitFor(t, 10*time.Second, "the worker's lease request to wait", func() bool {
		workers, err := client.Workers(context.Background())
		return err == nil && workers["waitingHere"].(float64) >= 1
	})
	cancelled := time.Now()
	cancel()
	select {
	case err := <-ended:
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(cancelled); took > 2*time.Second {
			t.Fatalf("Run took %s to stop", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop")
	}
}

func TestWorkerCancelsTheHandlersContextWhenTheLeaseIsLost(t *testing.T) {
	ctx := context.Background()
	client := newClient()
	if _, _, err := client.Create(ctx, punctual.NewTask{Type: lostType}); err != nil {
		t.Fatal(err)
	}
	run, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	var reported sync.Mutex // OnError is called from the extension's goroutine too
	var refused []error
	var handlerSaw error
	worker := punctual.Worker{Client: client, Types: []string{lostType}, Lease: time.Second, Wait: 5 * time.Second,
		OnError: func(err error) {
			reported.Lock()
			defer reported.Unlock()
			refused = append(refused, err)
		},
		Handle: func(work context.Context, task *punctual.LeasedTask) error {
			stop()
			// Settled behind the worker's back: its next extension is refused, the lease is lost.
			if _, err := client.Ack(ctx, task); err != nil {
				return err
			}
			select {
			case <-work.Done():
				handlerSaw = work.Err()
			case <-time.After(10 * time.Second):
			}
			return handlerSaw
		}}
	if err := worker.Run(run); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(handlerSaw, context.Canceled) {
		t.Fatalf("the handler's context was not cancelled: %v", handlerSaw)
	}
	if len(refused) == 0 || !errors.Is(refused[0], punctual.ErrConflict) {
		t.Fatalf("want the refused extension reported as a conflict, got %v", refused)
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
