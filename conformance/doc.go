// Package conformance is firehose's own MQTT conformance suite: every
// behaviour the Eclipse Paho interoperability suites check (MQTT 3.1.1 and
// 5), plus the protocol points of issue 13, run over the wire against
// cmd/broker, cmd/bridge with a route to JetStream, and Debian's mosquitto
// as the reference, with a side-by-side table of the outcomes. It is all
// test code (see README.md); this file only holds the package's doc.
package conformance
