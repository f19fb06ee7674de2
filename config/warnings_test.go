package config

import (
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/sinks"
)

// TestSizeWarnings: an input whose max_body (or the broker's
// max_packet_size) exceeds the limit of a required route its topics may
// reach is warned about, naming the key, the route and the limit; inputs
// whose topics the route does not take, optional routes and inputs under
// the limit are not.
func TestSizeWarnings(t *testing.T) {
	cfg, err := Load(write(t, "bridge.yaml", `
broker:
  max_packet_size: 524288
sinks:
  js:
    type: jetstream
    urls: [nats://127.0.0.1:4222]
    stream: {name: FIREHOSE, create: true, subjects: ["firehose.>"]}
  ext:
    type: mqtt
    url: tcp://127.0.0.1:1883
    client_id: bridge
    max_packet_size: 64MiB
routes:
  - {name: chef-failures, filters: ["chef/+/+/run/failure"], sink: js}
  - {name: ansible, filters: ["ansible/#"], sink: js, required: false}
  - {name: everything, filters: ["#"], sink: ext}
ansible:
  max_body: 512KiB
`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range cfg.Warnings() {
		got = append(got, w.String())
	}
	want := []string{
		"chef.max_body: 32MiB is over the 1MiB limit of required route chef-failures (sink js: nats-server's default max_payload; " +
			"set sinks.js.max_payload if the server's differs); a message over it is answered 413. Lower chef.max_body, or raise the sink's limit",
		"subunit.max_body: 128MiB is over the 64MiB limit of required route everything (sink ext: sinks.ext.max_packet_size); " +
			"a message over it is answered 413. Lower subunit.max_body, or raise the sink's limit",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A running bridge passes the limits it learnt: a server with a 64 MiB
	// max_payload leaves only the broker without a limit of its own.
	cfg.Broker.MaxPacketSize = 0
	live := cfg.SizeWarnings(func(sink string) (sinks.Limit, bool) {
		return sinks.Limit{Bytes: 64 << 20, From: "the NATS server's max_payload"}, sink == "js"
	})
	if len(live) != 1 || live[0].Key != "broker.max_packet_size" || !strings.Contains(live[0].Msg, "no limit is over the 64MiB limit of required route chef-failures") ||
		!strings.Contains(live[0].Msg, "refused with 0x97 (MQTT 5) or acknowledged and dropped (MQTT 3.1.1)") {
		t.Errorf("with the server's limit: %v", live)
	}
}
