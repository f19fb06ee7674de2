// Package dashboard is the live fleet page that the bridge serves at `/`, and
// the read-only HTTP API behind it: Server-Sent Events of any MQTT filter
// (`/api/v1/stream`) and snapshots of what it aggregates from the bus (the Chef
// fleet, Ansible plays, changes, the bridge's health).
//
// It reads the bus as an anonymous MQTT subscriber would, through a Source
// (the embedded broker's inline subscriptions), and so shows nothing an
// anonymous client could not read. It filters, sorts and counts on the server,
// so that a page stays light with ten thousand nodes; the page itself is
// plain HTML, CSS and JavaScript embedded in the binary, loading nothing from
// the network.
//
// It must not publish, must not slow a publisher (messages reach it through
// bounded queues and are dropped and counted when it falls behind), and must
// cost a client no more than a bounded queue and one goroutine per stream.
package dashboard
