package broker

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	pebbledb "github.com/cockroachdb/pebble"
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/storage"
	"github.com/mochi-mqtt/server/v2/hooks/storage/pebble"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/internal/logging"
)

// retainedEvents are the mochi events that keep retained messages on disk.
var retainedEvents = []byte{
	mqtt.OnRetainMessage,
	mqtt.OnRetainedExpired,
	mqtt.StoredRetainedMessages,
}

// storeHook is mochi's pebble storage hook for client sessions, which
// operators opt into with persistence.sessions (it costs a disk write per
// QoS 1 delivery). Retained messages are never its: they are in the
// retained store (see retain.go).
type storeHook struct {
	*pebble.Hook
}

func newStoreHook(cfg Persistence, log zerolog.Logger) (*storeHook, *pebble.Options, error) {
	path := filepath.Join(cfg.Path, "sessions")
	if err := os.MkdirAll(path, 0o750); err != nil {
		return nil, nil, fmt.Errorf("broker.persistence.path: %w", err)
	}
	opts := &pebble.Options{
		Path:    path,
		Mode:    pebble.Sync,
		Options: &pebbledb.Options{Logger: logging.Pebble{Log: log}},
	}
	return &storeHook{Hook: new(pebble.Hook)}, opts, nil
}

// ID names the hook in mochi's logs.
func (h *storeHook) ID() string { return "firehose-sessions" }

// Provides limits the pebble hook to sessions.
func (h *storeHook) Provides(b byte) bool {
	return h.Hook.Provides(b) && bytes.IndexByte(retainedEvents, b) < 0
}

// OnSubscribed stores the subscriptions of network clients, not those of
// the inline client (the dashboard's views, the watches for delayed wills:
// wills.go). Those belong to this process, and a restart does not bring
// their handlers back: mochi would restore each as a plain subscription of
// the client "inline", and each costs a synced write.
func (h *storeHook) OnSubscribed(cl *mqtt.Client, pk packets.Packet, codes []byte) {
	if !cl.Net.Inline {
		h.Hook.OnSubscribed(cl, pk, codes)
	}
}

// OnUnsubscribed is OnSubscribed's undoing, for network clients only.
func (h *storeHook) OnUnsubscribed(cl *mqtt.Client, pk packets.Packet) {
	if !cl.Net.Inline {
		h.Hook.OnUnsubscribed(cl, pk)
	}
}

// StoredSubscriptions leaves out, and deletes, the inline client's
// subscriptions that earlier versions stored.
func (h *storeHook) StoredSubscriptions() ([]storage.Subscription, error) {
	subs, err := h.Hook.StoredSubscriptions()
	return slices.DeleteFunc(subs, func(s storage.Subscription) bool {
		if s.Client != mqtt.InlineClientId {
			return false
		}
		h.Hook.OnUnsubscribed(&mqtt.Client{ID: s.Client}, packets.Packet{Filters: packets.Subscriptions{{Filter: s.Filter}}})
		return true
	}), err
}
