package punctual_test

// W3C trace context through the Go client against the real service: a create's context (the
// client's WithTraceContext provider, or WithTrace on the call's context in its place) reaches
// the task the worker loop hands its handler, in the caller's trace under a span id of the
// service's; a create without one hands the handler none. An empty value is not sent (a recording
// server shows the headers).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	punctual "github.com/punctual/punctual/clients/go"
)

const traceType = "go_trace_job"

var traceparentShape = regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`)

// caller answers a traceparent of a new trace, its trace id and its span id.
func caller(t *testing.T) (traceparent, traceID, spanID string) {
	t.Helper()
	id := make([]byte, 24)
	if _, err := rand.Read(id); err != nil {
		t.Fatal(err)
	}
	traceID, spanID = hex.EncodeToString(id[:16]), hex.EncodeToString(id[16:])
	return "00-" + traceID + "-" + spanID + "-01", traceID, spanID
}

// handOne answers the task the worker loop hands its handler, for the one task due.
func handOne(t *testing.T, client *punctual.Client) punctual.LeasedTask {
	t.Helper()
	run, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	var handed []punctual.LeasedTask
	worker := punctual.Worker{Client: client, Types: []string{traceType}, Lease: 10 * time.Second, Wait: 5 * time.Second,
		Handle: func(_ context.Context, task *punctual.LeasedTask) error {
			handed = append(handed, *task)
			stop()
			return nil
		}}
	if err := worker.Run(run); err != nil {
		t.Fatal(err)
	}
	if len(handed) != 1 {
		t.Fatalf("want 1 task handed to the handler, got %d", len(handed))
	}
	return handed[0]
}

func assertInTrace(t *testing.T, traceID, callerSpanID, traceparent string) {
	t.Helper()
	if !traceparentShape.MatchString(traceparent) {
		t.Fatalf("want a traceparent on the leased task, got %q", traceparent)
	}
	parts := strings.Split(traceparent, "-")
	if parts[1] != traceID {
		t.Fatalf("want the caller's trace %s, got %s", traceID, parts[1])
	}
	if parts[2] == callerSpanID {
		t.Fatalf("want a span of the service's, got the caller's own %s", callerSpanID)
	}
}

func TestTraceTheProvidersContextReachesTheWorkerLoopsHandler(t *testing.T) {
	traceparent, traceID, spanID := caller(t)
	client := punctual.NewClient(env("PUNCTUAL_URL"), punctual.WithToken(env("PUNCTUAL_TOKEN")),
		punctual.WithTraceContext(func(context.Context) punctual.TraceContext {
			return punctual.TraceContext{Traceparent: traceparent, Tracestate: "shop=checkout"}
		}))
	made, _, err := client.Create(context.Background(), punctual.NewTask{Type: traceType, Payload: map[string]any{"n": 1}})
	if err != nil {
		t.Fatal(err)
	}
	task := handOne(t, client)
	if task.ID != made.ID {
		t.Fatalf("want task %d, got %d", made.ID, task.ID)
	}
	assertInTrace(t, traceID, spanID, task.Traceparent)
	if task.Tracestate != "shop=checkout" {
		t.Fatalf("want the caller's tracestate, got %q", task.Tracestate)
	}
}

func TestTraceACallsOwnContextTakesThePlaceOfTheProviders(t *testing.T) {
	providers, _, _ := caller(t)
	traceparent, traceID, spanID := caller(t)
	client := punctual.NewClient(env("PUNCTUAL_URL"), punctual.WithToken(env("PUNCTUAL_TOKEN")),
		punctual.WithTraceContext(func(context.Context) punctual.TraceContext {
			return punctual.TraceContext{Traceparent: providers, Tracestate: "shop=provider"}
		}))
	ctx := punctual.WithTrace(context.Background(), punctual.TraceContext{Traceparent: traceparent})
	answer, err := client.CreateMany(ctx, []punctual.NewTask{{Type: traceType, Payload: map[string]any{"n": 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if answer.Created != 1 || answer.Results[0].ID == nil {
		t.Fatalf("want 1 task created, got %+v", answer)
	}
	task := handOne(t, client)
	if task.ID != *answer.Results[0].ID {
		t.Fatalf("want task %d, got %d", *answer.Results[0].ID, task.ID)
	}
	assertInTrace(t, traceID, spanID, task.Traceparent)
	if task.Tracestate != "" {
		t.Fatalf("the call's context is taken whole, not mixed with the provider's: got tracestate %q", task.Tracestate)
	}
}

func TestTraceACreateWithoutContextHandsTheHandlerNone(t *testing.T) {
	client := newClient()
	made, _, err := client.Create(context.Background(), punctual.NewTask{Type: traceType, Payload: map[string]any{"n": 3}})
	if err != nil {
		t.Fatal(err)
	}
	task := handOne(t, client)
	if task.ID != made.ID {
		t.Fatalf("want task %d, got %d", made.ID, task.ID)
	}
	if task.Traceparent != "" || task.Tracestate != "" {
		t.Fatalf("want no trace context, got %q / %q", task.Traceparent, task.Tracestate)
	}
}

func TestTraceAnEmptyValueIsNotSent(t *testing.T) {
	var mu sync.Mutex
	var seen [][]string // per request: whether traceparent and tracestate were sent, and their values
	recorder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		var headers []string
		for _, name := range []string{"traceparent", "tracestate"} {
			if values, sent := r.Header[http.CanonicalHeaderKey(name)]; sent {
				headers = append(headers, name+"="+strings.Join(values, ","))
			}
		}
		seen = append(seen, headers)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"statusCode":400,"code":"RECORDED","message":"recorded"}`))
	}))
	defer recorder.Close()
	traceparent, _, _ := caller(t)
	client := punctual.NewClient(recorder.URL, punctual.WithRetries(0, 0),
		punctual.WithTraceContext(func(context.Context) punctual.TraceContext {
			return punctual.TraceContext{Traceparent: traceparent, Tracestate: ""}
		}))
	if _, _, err := client.Create(context.Background(), punctual.NewTask{Type: traceType}); err == nil {
		t.Fatal("want the recorder's 400")
	}
	ctx := punctual.WithTrace(context.Background(), punctual.TraceContext{})
	if _, err := client.CreateMany(ctx, []punctual.NewTask{{Type: traceType}}); err == nil {
		t.Fatal("want the recorder's 400")
	}
	want := [][]string{{"traceparent=" + traceparent}, nil}
	if !reflect.DeepEqual(seen, want) {
		t.Fatalf("want trace headers %q, got %q", want, seen)
	}
}
