package configdb

import (
	"errors"
	"fmt"
)

// ErrorKind classifies the errors a caller can act on. The HTTP API maps each
// to a status code.
type ErrorKind int

const (
	// Invalid input: a missing field, a wrong JSON type, a document that is not
	// JSON (HTTP 400).
	Invalid ErrorKind = iota + 1
	// NotFound: no such environment, component, resource, level or version
	// (HTTP 404).
	NotFound
	// Conflict: the request is well-formed but clashes with what is stored,
	// such as a name already taken or a keys path that does not exist (HTTP 409).
	Conflict
	// PreconditionFailed: an If-Match ETag no longer matches (HTTP 412).
	PreconditionFailed
)

// Error is an error the caller caused, with a message meant for the user.
type Error struct {
	Kind ErrorKind
	// Msg says what is wrong, naming the object or the path at fault.
	Msg string
	// Field names the input field at fault, for Invalid errors, when there is one.
	Field string
}

func (e *Error) Error() string { return e.Msg }

func errorf(kind ErrorKind, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

func invalidField(field, format string, args ...any) error {
	return &Error{Kind: Invalid, Msg: fmt.Sprintf(format, args...), Field: field}
}

// KindOf returns the kind of a configdb error, or 0 for any other error
// (a storage failure).
func KindOf(err error) ErrorKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}
