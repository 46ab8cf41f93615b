package punctual

// W3C Trace Context on creates: the caller's traceparent and tracestate go out as headers of
// Create and CreateMany, so the task's runs join the caller's trace; a leased task carries the
// context of its run back out (LeasedTask.Traceparent, Tracestate).
//
// What it decides: the context of a call comes from WithTrace on the call's context, else from
// the client's WithTraceContext provider; nothing is checked here beyond not sending an empty
// value (the service validates, and ignores a malformed context).

import (
	"context"
	"net/http"
)

// TraceContext is a W3C trace context: the traceparent and tracestate headers ("" for none).
type TraceContext struct {
	Traceparent string
	Tracestate  string
}

// WithTraceContext gives each Create and CreateMany the caller's trace context, from the call's
// context. With OpenTelemetry:
//
//	punctual.WithTraceContext(func(ctx context.Context) punctual.TraceContext {
//		carrier := propagation.MapCarrier{}
//		otel.GetTextMapPropagator().Inject(ctx, carrier)
//		return punctual.TraceContext{Traceparent: carrier["traceparent"], Tracestate: carrier["tracestate"]}
//	})
func WithTraceContext(provider func(ctx context.Context) TraceContext) Option {
	return func(c *Client) { c.traceContext = provider }
}

type traceKey struct{}

// WithTrace answers ctx carrying this trace context: a Create or CreateMany called with it sends
// this one, in place of what the client's WithTraceContext provider would answer.
func WithTrace(ctx context.Context, trace TraceContext) context.Context {
	return context.WithValue(ctx, traceKey{}, trace)
}

// traceHeaders answers a create's trace headers: the call's own context, else the provider's.
func (c *Client) traceHeaders(ctx context.Context) http.Header {
	trace, given := ctx.Value(traceKey{}).(TraceContext)
	if !given && c.traceContext != nil {
		trace = c.traceContext(ctx)
	}
	headers := http.Header{}
	if trace.Traceparent != "" {
		headers.Set("traceparent", trace.Traceparent)
	}
	if trace.Tracestate != "" {
		headers.Set("tracestate", trace.Tracestate)
	}
	return headers
}
