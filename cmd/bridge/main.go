// Command bridge runs the firehose bridge: HTTP intake for Chef, Ansible,
// ConfigDB and the classic firehose sources, an embedded MQTT broker, and
// routes to NATS. With no config it runs everything embedded.
package main

import (
	"os"

	"github.com/opsfirehose/firehose/cli"
)

func main() {
	env, stop := cli.OS()
	code := cli.Bridge(env, os.Args[1:])
	stop()
	os.Exit(code)
}
