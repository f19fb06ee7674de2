package broker

import (
	"bytes"
	"fmt"
	"os"

	pebbledb "github.com/cockroachdb/pebble"
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/storage/pebble"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/internal/logging"
)

// retainedEvents are the mochi events that keep retained messages on disk.
var retainedEvents = []byte{
	mqtt.OnRetainMessage,
	mqtt.OnRetainedExpired,
	mqtt.StoredRetainedMessages,
}

// storeHook is mochi's pebble storage hook limited to what we persist. By
// default that is retained messages only: persisting sessions costs a disk
// write per QoS 1 delivery, which operators opt into with persistence.sessions.
type storeHook struct {
	*pebble.Hook
	sessions bool
}

func newStoreHook(cfg Persistence, log zerolog.Logger) (*storeHook, *pebble.Options, error) {
	if err := os.MkdirAll(cfg.Path, 0o750); err != nil {
		return nil, nil, fmt.Errorf("broker.persistence.path: %w", err)
	}
	opts := &pebble.Options{
		Path: cfg.Path,
		// Retained messages are rare (a node's last status, say) and must
		// survive a crash, so each write is synced.
		Mode:    pebble.Sync,
		Options: &pebbledb.Options{Logger: logging.Pebble{Log: log}},
	}
	return &storeHook{Hook: new(pebble.Hook), sessions: cfg.Sessions}, opts, nil
}

// ID names the hook in mochi's logs.
func (h *storeHook) ID() string { return "firehose-store" }

// Provides limits the pebble hook to retained messages unless sessions are on.
func (h *storeHook) Provides(b byte) bool {
	if h.sessions {
		return h.Hook.Provides(b)
	}
	return bytes.IndexByte(retainedEvents, b) >= 0
}
