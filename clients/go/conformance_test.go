package punctual_test

// The conformance cases (clients/conformance/cases.json) through the Go client, a subtest per
// case, against the real service `npm run test:go` started, as the TypeScript, PHP and Python
// clients run them. Each call goes through the client's own API; an error's kind is what
// errors.Is says of it.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	punctual "github.com/punctual/punctual/clients/go"
)

var kinds = []struct {
	sentinel error
	kind     string
}{
	{punctual.ErrBadRequest, "bad_request"},
	{punctual.ErrUnauthorized, "unauthorized"},
	{punctual.ErrForbidden, "forbidden"},
	{punctual.ErrNotFound, "not_found"},
	{punctual.ErrConflict, "conflict"},
	{punctual.ErrPayloadTooLarge, "payload_too_large"},
	{punctual.ErrUnavailable, "unavailable"},
}

// utcTimes are written in UTC with a Z by the API; runAtLocal has the offset of the task's zone.
var utcTimes = map[string]bool{"runAt": true, "createdAt": true, "updatedAt": true, "finishedAt": true, "leaseUntil": true}

func TestConformance(t *testing.T) {
	var file struct {
		Cases []conformanceCase `json:"cases"`
	}
	text, err := os.ReadFile(env("PUNCTUAL_CONFORMANCE_CASES"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(text, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Cases) == 0 {
		t.Fatal("no case was read")
	}
	run := "go-" + randomHex(4)
	for _, c := range file.Cases {
		c := c
		t.Run(c.Name, func(t *testing.T) {
			if reason, ok := c.Skip["go"]; ok {
				t.Skip(reason)
			}
			client := newClient()
			r := &caseRun{
				testCase:     c,
				placeholders: map[string]string{"run": run, "receiver": env("PUNCTUAL_RECEIVER_URL"), "secret": env("PUNCTUAL_WEBHOOK_SECRET")},
				call: func(name string, args map[string]any) (any, error) {
					answer, err := call(client, name, args)
					if err != nil {
						return nil, err
					}
					return view(answer)
				},
				errorView: errorView,
			}
			if err := r.run(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func call(client *punctual.Client, name string, a map[string]any) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if trace, given := a["traceContext"].(map[string]any); given {
		var tc punctual.TraceContext
		tc.Traceparent, _ = trace["traceparent"].(string)
		tc.Tracestate, _ = trace["tracestate"].(string)
		ctx = punctual.WithTrace(ctx, tc)
	}
	switch name {
	case "create":
		task, err := newTask(a["task"])
		if err != nil {
			return nil, err
		}
		made, created, err := client.Create(ctx, task)
		return map[string]any{"created": created, "task": made}, err
	case "createMany":
		var tasks []punctual.NewTask
		for _, item := range a["tasks"].([]any) {
			task, err := newTask(item)
			if err != nil {
				return nil, err
			}
			tasks = append(tasks, task)
		}
		return client.CreateMany(ctx, tasks)
	case "get":
		return client.Get(ctx, integer(a["id"]))
	case "getByKey":
		return client.GetByKey(ctx, a["key"].(string))
	case "cancelByKey":
		return client.CancelByKey(ctx, a["key"].(string))
	case "pending":
		q := punctual.PendingQuery{Limit: int(integer(a["limit"]))}
		q.Type, _ = a["type"].(string)
		q.Cursor, _ = a["cursor"].(string)
		return client.Pending(ctx, q)
	case "allPending":
		var tasks []*punctual.Task
		q := punctual.PendingQuery{Limit: int(integer(a["pageSize"]))}
		q.Type, _ = a["type"].(string)
		err := client.AllPending(ctx, q, func(task *punctual.Task) error {
			tasks = append(tasks, task)
			return nil
		})
		return map[string]any{"tasks": tasks}, err
	case "lease":
		tasks, err := client.Lease(ctx, punctual.LeaseRequest{Types: texts(a["types"]), Max: int(integer(a["max"])), Lease: millis(a["leaseMs"]), Wait: millis(a["waitMs"])})
		if tasks == nil {
			tasks = []punctual.LeasedTask{}
		}
		return map[string]any{"tasks": tasks}, err
	case "extend":
		task, err := leased(a["task"])
		if err != nil {
			return nil, err
		}
		return client.Extend(ctx, task, millis(a["leaseMs"]))
	case "ack":
		task, err := leased(a["task"])
		if err != nil {
			return nil, err
		}
		return client.Ack(ctx, task)
	case "nack":
		task, err := leased(a["task"])
		if err != nil {
			return nil, err
		}
		permanent, _ := a["permanent"].(bool)
		return client.Nack(ctx, task, a["error"].(string), punctual.NackOptions{Permanent: permanent})
	case "work":
		return work(client, a)
	case "verifyWebhook":
		verifier := punctual.WebhookVerifier{Secrets: texts(a["secrets"])}
		err := verifier.Verify(a["method"].(string), a["url"].(string), []byte(a["body"].(string)), a["signature"].(string), a["idempotencyKey"].(string))
		var refused *punctual.WebhookError
		if err != nil && !errors.As(err, &refused) {
			return nil, err
		}
		return map[string]any{"valid": err == nil}, nil
	}
	return nil, fmt.Errorf("the Go runner has no call %s", name)
}

// work runs the worker loop for the case "work": handles "tasks" runs as the case file says, then
// stops by cancelling its context.
func work(client *punctual.Client, a map[string]any) (any, error) {
	ctx, stop := context.WithTimeout(context.Background(), 60*time.Second)
	defer stop()
	handled := []map[string]any{}
	worker := punctual.Worker{
		Client: client,
		Types:  texts(a["types"]),
		Lease:  millis(a["leaseMs"]),
		Wait:   millis(a["waitMs"]),
		Handle: func(_ context.Context, task *punctual.LeasedTask) error {
			handled = append(handled, map[string]any{
				"id":             task.ID,
				"attempt":        task.Attempt,
				"idempotencyKey": task.IdempotencyKey,
				"traceparent":    orNull(task.Traceparent),
				"tracestate":     orNull(task.Tracestate),
			})
			if len(handled) >= int(integer(a["tasks"])) {
				stop()
			}
			var payload struct{ Do, Message string }
			if err := task.DecodePayload(&payload); err != nil {
				return err
			}
			switch {
			case payload.Do == "fail-once" && task.Attempt == 1:
				return errors.New(payload.Message)
			case payload.Do == "permanent":
				return punctual.Permanent(errors.New(payload.Message))
			}
			return nil
		},
	}
	err := worker.Run(ctx)
	return map[string]any{"handled": handled}, err
}

// orNull answers a text the client gives as "" for none as the API's null.
func orNull(text string) any {
	if text == "" {
		return nil
	}
	return text
}

// newTask reads a create's body (the API's names) into a NewTask; a field it does not know fails,
// so a case cannot pass by a field the runner dropped.
func newTask(body any) (punctual.NewTask, error) {
	fields, _ := body.(map[string]any)
	var task punctual.NewTask
	for name, value := range fields {
		switch name {
		case "type":
			task.Type = value.(string)
		case "payload":
			task.Payload = value
		case "runAt":
			task.RunAt = value.(string)
		case "delayMs":
			task.Delay = millis(value)
		case "timezone":
			task.Timezone = value.(string)
		case "key":
			task.Key = value.(string)
		case "maxAttempts":
			task.MaxAttempts = int(integer(value))
		case "misfire":
			task.Misfire = value.(string)
		default:
			return task, fmt.Errorf("the Go runner does not map the create field %s", name)
		}
	}
	return task, nil
}

// leased reads a saved lease (the API's JSON) back into a LeasedTask.
func leased(saved any) (*punctual.LeasedTask, error) {
	text, err := json.Marshal(saved)
	if err != nil {
		return nil, err
	}
	var task punctual.LeasedTask
	return &task, json.Unmarshal(text, &task)
}

// view answers the client's value as JSON values with the API's names and time formats.
func view(value any) (any, error) {
	text, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(text, &out); err != nil {
		return nil, err
	}
	return apiTimes(out, ""), nil
}

func apiTimes(value any, name string) any {
	switch v := value.(type) {
	case map[string]any:
		for key, item := range v {
			v[key] = apiTimes(item, key)
		}
	case []any:
		for i, item := range v {
			v[i] = apiTimes(item, "")
		}
	case string:
		at, err := time.Parse(time.RFC3339Nano, v)
		switch {
		case err != nil:
		case utcTimes[name]:
			return at.UTC().Format("2006-01-02T15:04:05.000Z07:00")
		case name == "runAtLocal":
			return at.Format("2006-01-02T15:04:05.000-07:00")
		}
	}
	return value
}

func errorView(err error) map[string]any {
	var apiErr *punctual.APIError
	if !errors.As(err, &apiErr) {
		return nil
	}
	kind := "api"
	for _, k := range kinds {
		if errors.Is(err, k.sentinel) {
			kind = k.kind
			break
		}
	}
	shown := map[string]any{"kind": kind, "status": float64(apiErr.Status), "code": apiErr.Code, "message": apiErr.Message}
	if apiErr.Task != nil {
		task, err := view(apiErr.Task)
		if err != nil {
			return nil
		}
		shown["task"] = task
	}
	return shown
}

func integer(value any) int64 {
	number, _ := value.(float64)
	return int64(number)
}

func millis(value any) time.Duration { return time.Duration(integer(value)) * time.Millisecond }

func texts(value any) []string {
	items, _ := value.([]any)
	out := make([]string, len(items))
	for i, item := range items {
		out[i] = fmt.Sprint(item)
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
