package broker

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

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
