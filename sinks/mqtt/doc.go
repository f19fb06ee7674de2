// Package mqtt is the sink on an external MQTT broker, through paho, with
// its `sinks:` entry (Config) and how it addresses a message (the topic as
// it is). It lives apart from sinks so that the router, which imports sinks
// for the Sink contract, links no MQTT library.
package mqtt
