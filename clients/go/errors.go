package punctual

// What the client returns when a call fails: an error status from the service is an *APIError
// carrying its status, code and message (the message names the field at fault), and for a 409
// the task as it is now. errors.Is matches it against the sentinel of its status, so a shop can
// branch on the kind without reading numbers; errors.As gives the details. No answer at all is
// the transport's error, wrapped with the call it failed.

import (
	"errors"
	"fmt"
)

// The kinds of error status, for errors.Is.
var (
	ErrBadRequest      = errors.New("punctual: bad request")         // 400: the message names the field; nothing was changed
	ErrUnauthorized    = errors.New("punctual: unauthorized")        // 401: no token, or an unknown one
	ErrForbidden       = errors.New("punctual: forbidden")           // 403: the token's role may not call this route
	ErrNotFound        = errors.New("punctual: not found")           // 404: no task with that id or key
	ErrConflict        = errors.New("punctual: conflict")            // 409: key taken by other content, wrong state, or a lease not this worker's
	ErrPayloadTooLarge = errors.New("punctual: payload too large")   // 413
	ErrUnavailable     = errors.New("punctual: service unavailable") // 503: the database is down or the service stopping; a create with a key may be sent again
)

var sentinels = map[int]error{
	400: ErrBadRequest,
	401: ErrUnauthorized,
	403: ErrForbidden,
	404: ErrNotFound,
	409: ErrConflict,
	413: ErrPayloadTooLarge,
	503: ErrUnavailable,
}

// APIError is an error status from the service.
type APIError struct {
	Status  int
	Code    string // PUNCTUAL_BAD_REQUEST, PUNCTUAL_NOT_YOUR_LEASE, …
	Message string
	// Task is the task as it is now, on a 409 that carries one.
	Task *Task
	// Body is the error's JSON as the service sent it.
	Body map[string]any
}

func (e *APIError) Error() string {
	return fmt.Sprintf("punctual: %d %s: %s", e.Status, e.Code, e.Message)
}

// Is reports whether target is the sentinel of the error's status (ErrNotFound for a 404…).
func (e *APIError) Is(target error) bool {
	sentinel, ok := sentinels[e.Status]
	return ok && sentinel == target
}

// PermanentError marks a worker handler's failure that no retry can fix: the task is failed for
// good instead of being tried again. Make one with Permanent.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps a handler's error so the worker fails its task for good (no retry).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}
