// Command broker runs the firehose MQTT broker alone: anonymous read-only
// subscribers, authenticated publishers, TCP, TLS and WebSocket listeners.
// It replaces the OpenStack firehose's mosquitto. It links only what it
// runs (see TestLinksOnlyTheBroker).
package main

import (
	"github.com/opsfirehose/firehose/app/brokeronly"
	"github.com/opsfirehose/firehose/cli/clicore"
)

func main() { clicore.Exit(brokeronly.Broker) }
