// Package history keeps the bus's history in a JetStream stream, on an
// embedded nats-server (in process, no listening socket, stored under
// <data_dir>/history) or on the servers of a jetstream sink, bounded by
// size and age, and reads it back: Replay for "since T", Follow for "since
// T, then live" with no gap and no duplicate, and GET /api/v1/history.
//
// The stream holds packs, not one JetStream message per bus message: the
// messages written together share one stream message on the subject
// <subject_prefix>.pack.<their topics' first level> (pack.go says the
// format), so that JetStream's cost per message and per subject is paid per
// pack; a replay reads its filters' first levels and matches each message's
// MQTT topic in process. Record packs a message as it comes, into a buffer
// the writer hands back, and the writer compresses each pack (S2) when
// that makes it smaller: the bus's JSON shrinks to a fifth or less, and
// what is not stored nats-server need not copy, hash and write. Each MQTT
// client of the broker records through a Stage of its own, which builds
// its packs under a lock no other publisher takes, compressing them 32 KiB
// at a time as it goes, and hands them to the writer whole (stage.go).
// Other readers of a sink's stream read packs: the API is the way in.
//
// It must not cost the live path: Record is called in the broker's publish
// path and never blocks and never fails; a message the store cannot take
// (a full queue, a slow or down store) is left out, counted and logged, and
// Status says the history is degraded. It must not decide who may read what:
// the broker's read policy does, through Access. It is not a delivery
// guarantee: routes with outboxes are.
package history
