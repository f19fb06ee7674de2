// Package retained is the broker's store of retained messages: the fleet's
// state (every node's chef/<org>/<node>/status, every rollout tally), kept
// on disk under the data directory by default, or in memory.
//
// mochi's own retained store keeps a decoded packet and four maps per topic
// level for every message in the heap, copies the whole map once a second to
// look for expired ones, and copies every match into one slice for each late
// subscriber. This store keeps the messages in pebble, sorted by topic:
//
//   - memory does not grow with the fleet (pebble's fixed memtable and block
//     cache; the operating system's page cache does the rest);
//   - a late subscriber's matches are read in chunks, in topic order, from the
//     literal prefix of its filter ([Store.Scan]), never gathered whole;
//   - nothing runs while nothing happens: expiry is a heap of the deadlines of
//     the messages that have one, and a timer for the earliest;
//   - a write is applied at once and made durable by a group commit: one
//     fsync covers every write that came before it ([Store.Durable],
//     [Store.WhenDurable]), so many publishers cost one sync, not one each.
//
// It must not know about MQTT packets or mochi: a message's value is opaque
// bytes (the broker stores the encoded PUBLISH), with its deadline beside it.
package retained
