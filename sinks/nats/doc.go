// Package nats is the sink on NATS core and JetStream, through nats.go,
// with its `sinks:` entry (Config, for types nats and jetstream) and how it
// addresses a message (a subject under the route's subject_prefix). It
// lives apart from sinks so that the router, which imports sinks for the
// Sink contract, links no NATS client.
//
// It delivers what it is given: it must not filter or buffer on disk.
// Buffering is the outbox's.
package nats
