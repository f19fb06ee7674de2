// Command broker runs the firehose MQTT broker alone: anonymous read-only
// subscribers, authenticated publishers, TCP, TLS and WebSocket listeners.
// It replaces the OpenStack firehose's mosquitto.
package main

import (
	"os"

	"github.com/opsfirehose/firehose/cli"
)

func main() {
	env, stop := cli.OS()
	code := cli.Broker(env, os.Args[1:])
	stop()
	os.Exit(code)
}
