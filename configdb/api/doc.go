// Package configdb serves the ConfigDB API, tuning-box compatible, under
// /api/v1/config, and publishes every change as an event.
//
// The domain and storage live in the top-level configdb package; this one is
// the HTTP surface (routes, JSON shapes, status codes, the {"msg": ...} error
// bodies tuning-box clients expect), authentication (static tokens, HTTP
// Basic against bcrypt users, Keystone tokens) and the outbox relay that
// publishes the events the store recorded with each change.
//
// A write answers 2xx once its change and its event are committed together:
// the event is then safe in the outbox, and is published before the answer
// when the bus takes it, or retried by the relay (from Start to Close) until it does.
//
// It must not build topics by hand (the store does, through topics/) nor talk
// to a broker other than through bus.Publisher.
package api
