package nats

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestAckError reads JetStream's answers to a publish as nats.go's
// PublishMsgAsync does: the acks and errors are as nats-server 2.15 sends
// them.
func TestAckError(t *testing.T) {
	noResponders := nats.Header{}
	noResponders.Set("Status", "503")
	for _, tc := range []struct {
		name string
		data string
		hdr  nats.Header
		want error // nil, a sentinel, or *jetstream.APIError (checked by code)
		code jetstream.ErrorCode
	}{
		{name: "ack", data: `{"stream":"FIREHOSE","seq":42}`},
		{name: "duplicate", data: `{"stream":"FIREHOSE", "seq":42,"duplicate":true}`},
		{name: "ack with domain", data: `{"stream":"FIREHOSE","domain":"hub","seq":1}`},
		{name: "too large", data: `{"error":{"code":400,"err_code":10054,"description":"message size exceeds maximum allowed"},"stream":"FIREHOSE","seq":0}`,
			want: &jetstream.APIError{}, code: jetstream.JSErrCodeStreamMessageExceedsMaximum},
		{name: "no responders", hdr: noResponders, want: jetstream.ErrNoStreamResponse},
		{name: "empty", want: jetstream.ErrInvalidJSAck},
		{name: "no stream", data: `{"seq":1}`, want: jetstream.ErrInvalidJSAck},
		{name: "empty stream", data: `{"stream":"","seq":1}`, want: jetstream.ErrInvalidJSAck},
		{name: "not json", data: `{"stream":"FIREHOSE"`, want: jetstream.ErrInvalidJSAck},
		{name: "empty error", data: `{"error":{}}`, want: jetstream.ErrInvalidJSAck},
		{name: "stream first, then an error", data: `{"stream":"FIREHOSE","error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"}}`,
			want: &jetstream.APIError{}, code: 10077},
		{name: "stream first, cut short", data: `{"stream":"FIREHOSE","seq":`, want: jetstream.ErrInvalidJSAck},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ackError(&nats.Msg{Data: []byte(tc.data), Header: tc.hdr})
			var apiErr *jetstream.APIError
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("ackError = %v, want an ack", err)
			case tc.code != 0:
				if !errors.As(err, &apiErr) || apiErr.ErrorCode != tc.code || (apiErr.Code != 400 && apiErr.Code != 503) || apiErr.Description == "" {
					t.Fatalf("ackError = %#v, want the API error %d", err, tc.code)
				}
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("ackError = %v, want %v", err, tc.want)
			}
		})
	}
}
