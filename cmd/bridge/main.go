// Command bridge runs the firehose bridge: HTTP intake for Chef, Ansible,
// ConfigDB and the classic firehose sources, an embedded MQTT broker, and
// routes to NATS. With no config it runs everything embedded.
package main

import (
	"github.com/opsfirehose/firehose/cli"
	"github.com/opsfirehose/firehose/cli/clicore"
)

func main() { clicore.Exit(cli.Bridge) }
