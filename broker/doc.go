// Package broker is the embedded MQTT broker, mochi-mqtt with firehose's
// trust boundary (a pre-authentication gate on every listener, bcrypt users
// with topic ACLs and login throttling, wills and client ids bound to
// identities), retained-message persistence, slow-subscriber drop
// accounting and Prometheus metrics. The bridge and cmd/broker both run it
// from the same `broker:` config section. See README.md.
//
// It must not know about adapters, routes or sinks: the bridge adds the
// router as a mochi hook (AddHook), has the history handed what the broker
// delivers (SetRecorder) and publishes through Publish. Accounts
// are fixed when the broker is made; changing them takes a restart.
package broker
