package payloads

import "strconv"

// FieldError is input that cannot be published, the one error type every
// source's parser returns for it, so that an intake answers any of them
// alike: HTTP 400 {"error": ..., "field": Field}.
//
// Field names what is at fault: a JSON path ("stats.ok",
// "resources[3].status"), a mail header, a query parameter; it is empty when
// the input as a whole is. Line is the 1-based line at fault in
// line-delimited input (NDJSON), 0 otherwise. Msg says what is wrong and what
// would be right. Err, when set, is what errors.Is and errors.As find beneath
// it: the source's ErrInvalid, and any more specific cause.
type FieldError struct {
	Line  int
	Field string
	Msg   string
	Err   error
}

// Error returns "line N: field: message", leaving out what is unset.
func (e *FieldError) Error() string {
	s := ""
	if e.Line > 0 {
		s = "line " + strconv.Itoa(e.Line) + ": "
	}
	if e.Field != "" {
		s += e.Field + ": "
	}
	return s + e.Msg
}

// Unwrap returns Err.
func (e *FieldError) Unwrap() error { return e.Err }
