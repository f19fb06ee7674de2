// Package sinkconfig is the `sinks:` entry of the config file: its `type`
// chooses the sink package whose Config the rest of the entry is (nats and
// jetstream: sinks/nats; mqtt: sinks/mqtt), which owns its keys, defaults
// and checks. It is the one place that knows every sink type; the router
// does not import it.
//
// It must not import the router or the adapters: the router reads a
// stream's subjects through ValidateSinks' function, not this package.
package sinkconfig
