package punctual

// The pull worker's loop: leases one task of the worker types at a time (waiting for one, a long
// poll), runs the handler on it, and settles it: a nil error acks, an error nacks with its message
// (tried again with the backoff), an error wrapped by Permanent fails the task for good.
//
// What it decides:
//   - Run stops when its context is cancelled: between tasks (the task at hand is finished and
//     settled first), and a lease request that is waiting is given up at once. The handler's
//     context is not the Run context, so a stop does not cut the task at hand short; it is
//     cancelled when the task's lease is lost (an extension was refused), so the work may stop.
//   - The lease is extended every third of Lease while the handler runs, from a goroutine.
//   - A lease or settle that fails (the service restarting, the network) goes to OnError and the
//     loop goes on after a pause: a task whose settle was lost comes back when its lease runs out,
//     at least once, with the same idempotency key.

import (
	"context"
	"errors"
	"time"
)

// Handler does a leased task's work.
type Handler func(ctx context.Context, task *LeasedTask) error

// Worker runs a pull worker's loop. Client, Types and Handle are needed; the rest have defaults.
type Worker struct {
	Client  *Client
	Types   []string
	Handle  Handler
	Lease   time.Duration // how long each task is leased (default 30 s); extended while Handle runs
	Wait    time.Duration // how long one lease request waits for a task (default 25 s, at most 30 s)
	OnError func(error)   // told of a lease, settle or extension that failed
}

// settleTimeout bounds an ack or nack sent after Run's context was cancelled.
const settleTimeout = 10 * time.Second

// Work runs a Worker with the default lease and wait until ctx is cancelled.
func (c *Client) Work(ctx context.Context, types []string, handle Handler) error {
	return (&Worker{Client: c, Types: types, Handle: handle}).Run(ctx)
}

// Run leases and handles tasks until ctx is cancelled; then it returns nil, the task at hand
// settled. It returns an error only for a Worker that is not set up.
func (w *Worker) Run(ctx context.Context) error {
	if w.Client == nil || len(w.Types) == 0 || w.Handle == nil {
		return errors.New("punctual: a Worker needs a Client, Types and Handle")
	}
	lease, wait := w.Lease, w.Wait
	if lease <= 0 {
		lease = 30 * time.Second
	}
	if wait <= 0 {
		wait = 25 * time.Second
	}
	for ctx.Err() == nil {
		tasks, err := w.Client.Lease(ctx, LeaseRequest{Types: w.Types, Max: 1, Lease: lease, Wait: wait})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			w.report(err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		for i := range tasks {
			w.runOne(ctx, &tasks[i], lease)
		}
	}
	return nil
}

func (w *Worker) runOne(ctx context.Context, task *LeasedTask, lease time.Duration) {
	work, lost := context.WithCancel(detached{ctx})
	defer lost()
	done := make(chan struct{})
	extended := make(chan struct{})
	go func() {
		defer close(extended)
		w.extendUntil(work, task, lease, done, lost)
	}()
	err := w.Handle(work, task)
	close(done)
	<-extended
	settle, cancel := context.WithTimeout(detached{ctx}, settleTimeout)
	defer cancel()
	if err == nil {
		_, err = w.Client.Ack(settle, task)
	} else {
		var permanent *PermanentError
		options := NackOptions{Permanent: errors.As(err, &permanent)}
		reason := err.Error()
		if reason == "" {
			reason = "failed"
		}
		_, err = w.Client.Nack(settle, task, reason, options)
	}
	if err != nil {
		// The lease was lost (it ran out: another worker has the task) or the service is away.
		w.report(err)
	}
}

func (w *Worker) extendUntil(ctx context.Context, task *LeasedTask, lease time.Duration, done <-chan struct{}, lost context.CancelFunc) {
	every := lease / 3
	if every < 500*time.Millisecond {
		every = 500 * time.Millisecond
	}
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-done:
			return
		case <-ticker.C:
			if _, err := w.Client.Extend(ctx, task, lease); err != nil {
				w.report(err)
				if errors.Is(err, ErrConflict) {
					lost() // another worker has the task now: the handler may stop
				}
			}
		}
	}
}

func (w *Worker) report(err error) {
	if w.OnError != nil {
		w.OnError(err)
	}
}

// detached is a context with the values of its parent and none of its cancellation or deadline
// (context.WithoutCancel, which Go 1.19 does not have).
type detached struct{ context.Context }

func (detached) Deadline() (time.Time, bool) { return time.Time{}, false }
func (detached) Done() <-chan struct{}       { return nil }
func (detached) Err() error                  { return nil }
