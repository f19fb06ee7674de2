// Package broker is the embedded MQTT broker, mochi-mqtt with firehose's
// access control (anonymous read-only, bcrypt users with topic ACLs),
// retained-message persistence, slow-subscriber drop accounting and
// Prometheus metrics. The bridge and cmd/broker both run it from the same
// `broker:` config section.
//
// It must not know about adapters, routes or sinks: the bridge adds the
// router as a mochi hook (AddHook) and publishes through Publish. Accounts
// are fixed when the broker is made; changing them takes a restart.
package broker
