package httpserver

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/opsfirehose/firehose/bus"
)

// Authenticate checks the request's token against tokens. The token is the
// first non-empty of the given headers; "Authorization" is read as
// "Bearer <token>". With no tokens configured every request passes. A missing
// token is answered 401, a wrong one 403; ok is false when an answer was
// written. name is the matching token's configured name, for logs.
func Authenticate(w http.ResponseWriter, r *http.Request, tokens *Tokens, headers ...string) (name string, ok bool) {
	if tokens == nil || !tokens.Required() {
		return "", true
	}
	var presented string
	for _, h := range headers {
		v := r.Header.Get(h)
		if strings.EqualFold(h, "Authorization") {
			scheme, token, found := strings.Cut(v, " ")
			if !found || !strings.EqualFold(scheme, "Bearer") {
				continue
			}
			v = strings.TrimSpace(token)
		}
		if v != "" {
			presented = v
			break
		}
	}
	if presented == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="firehose"`)
		WriteError(w, http.StatusUnauthorized, "missing token: send it in "+strings.Join(headers, " or "), "")
		return "", false
	}
	name, ok = tokens.Check(presented)
	if !ok {
		WriteError(w, http.StatusForbidden, "invalid token", "")
		return "", false
	}
	return name, true
}

// Retry-After for the transient publish failures.
const (
	RetryOverloaded  = 2 * time.Second
	RetryUnavailable = 5 * time.Second
)

// WritePublishError answers for an error from a bus.Publisher: 413 for a
// message bigger than the bus or a required route takes (the error names
// the route and its limit), 400 for a message that can never be published, 429 when the bus is overloaded, and
// 503 with Retry-After otherwise, so the sender keeps the message and retries.
// It never answers 500: the sender's input was fine, or it would have been
// refused before publishing.
func WritePublishError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, bus.ErrTooLarge):
		// Nothing was published: the sender should not retry this message as it is.
		WriteError(w, http.StatusRequestEntityTooLarge, err.Error(), "")
	case errors.Is(err, bus.ErrInvalid):
		WriteError(w, http.StatusBadRequest, err.Error(), "")
	case errors.Is(err, bus.ErrOverloaded):
		WriteRetry(w, http.StatusTooManyRequests, RetryOverloaded, "the bus is overloaded; retry later")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		WriteRetry(w, http.StatusServiceUnavailable, RetryUnavailable, "the message could not be made safe in time; retry later")
	default:
		WriteRetry(w, http.StatusServiceUnavailable, RetryUnavailable, "the bus is unavailable; retry later")
	}
}
