// Package punctual is a client for punctual, the one-shot timer service: schedule a task for a
// time, cancel it by its key, list what is pending, run a pull worker, verify a webhook.
//
//	client := punctual.NewClient("http://127.0.0.1:3000", punctual.WithToken(os.Getenv("PUNCTUAL_TOKEN")))
//	task, created, err := client.Create(ctx, punctual.NewTask{Type: "close_order", Payload: map[string]any{"orderSn": "SN123"},
//		Delay: 30 * time.Minute, Key: "close_order:SN123"})
//	_, err = client.CancelByKey(ctx, "close_order:SN123") // the order was paid
//
// It uses the standard library only, so adding it brings nothing else into a shop's module. Every
// call takes a context.Context first; an error status from the service is an *APIError (use
// errors.As), and errors.Is matches it against ErrNotFound, ErrConflict and the other sentinels.
// A Worker runs a pull worker's loop until its context is cancelled.
package punctual
