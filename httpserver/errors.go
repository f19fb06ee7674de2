package httpserver

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// ErrorBody is the JSON body of every 4xx and 5xx answer.
type ErrorBody struct {
	Error string `json:"error"`
	// Field names the input field at fault, when there is one.
	Field string `json:"field,omitempty"`
}

// WriteError answers with a JSON error body.
func WriteError(w http.ResponseWriter, status int, msg, field string) {
	WriteJSON(w, status, ErrorBody{Error: msg, Field: field})
}

// WriteRetry answers 429 or 503 with Retry-After, telling the sender the
// message was not taken and when to try again.
func WriteRetry(w http.ResponseWriter, status int, after time.Duration, msg string) {
	secs := int(after.Round(time.Second) / time.Second)
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	WriteError(w, status, msg, "")
}

// WriteJSON answers with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
