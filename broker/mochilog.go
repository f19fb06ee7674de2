package broker

import (
	"context"
	"log/slog"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/opsfirehose/firehose/internal/ellipsis"
)

// mochiHandler is the slog handler mochi logs through, in front of
// zerolog's. mochi narrates its hooks and listeners at info, and logs what
// clients ordinarily do as warnings: a publish it refuses or cannot
// process (with a dump of the whole packet, payload included), a low
// keepalive, a connection's end (with an empty message). Those are the
// clients' business, which our own hooks log where it matters (refused
// logins and publishes, the gate), so everything mochi logs below error
// goes to debug, with a packet reduced to what identifies it. Its errors (a
// listener that cannot serve, a store that cannot load) stay errors.
type mochiHandler struct{ next slog.Handler }

func (h mochiHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, mochiLevel(level))
}

func (h mochiHandler) Handle(ctx context.Context, r slog.Record) error {
	msg := r.Message
	if msg == "" {
		msg = "mochi reported an error" // its listeners' "connection ended" warnings have no message
	}
	out := slog.NewRecord(r.Time, mochiLevel(r.Level), msg, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(packetSummary(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h mochiHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	for i := range attrs {
		attrs[i] = packetSummary(attrs[i])
	}
	return mochiHandler{h.next.WithAttrs(attrs)}
}

func (h mochiHandler) WithGroup(name string) slog.Handler {
	return mochiHandler{h.next.WithGroup(name)}
}

// mochiLevel is the level a record of mochi's is logged at: errors as
// they are, anything else at debug.
func mochiLevel(l slog.Level) slog.Level {
	if l >= slog.LevelError {
		return l
	}
	return slog.LevelDebug
}

// packetSummary replaces a packet (mochi logs whole ones, payload and
// all) by its type, id, topic and size.
func packetSummary(a slog.Attr) slog.Attr {
	pk, ok := a.Value.Any().(packets.Packet)
	if !ok {
		return a
	}
	attrs := []any{slog.Int("type", int(pk.FixedHeader.Type)), slog.Int("id", int(pk.PacketID))}
	if pk.TopicName != "" {
		attrs = append(attrs, slog.String("topic", ellipsis.Cut(pk.TopicName, maxLoggedField)))
	}
	if len(pk.Payload) > 0 {
		attrs = append(attrs, slog.Int("payload_bytes", len(pk.Payload)))
	}
	return slog.Group(a.Key, attrs...)
}
