package sinkconfig_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/opsfirehose/firehose/internal/strictyaml"
	"github.com/opsfirehose/firehose/sinks/sinkconfig"
)

type file struct {
	Sinks map[string]sinkconfig.Config `yaml:"sinks"`
}

// decode reads a `sinks:` section, and the keys of its problems.
func decode(t *testing.T, doc string) (file, []string) {
	t.Helper()
	var f file
	err := strictyaml.Decode([]byte(doc), &f, strictyaml.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	var keys []string
	for _, e := range flatten(err) {
		var ke *strictyaml.KeyError
		if !errors.As(e, &ke) {
			t.Fatalf("%v: not a KeyError", e)
		}
		keys = append(keys, ke.Key)
	}
	return f, keys
}

func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// TestEachTypeOwnsItsKeys: the type chooses the sink package whose config
// the entry is; its defaults, its checks and its keys are that package's,
// and every problem names the key under sinks.<name>.
func TestEachTypeOwnsItsKeys(t *testing.T) {
	for _, tt := range []struct {
		name, entry string
		keys        []string // nil: valid
	}{
		{"nats", "type: nats\nurls: [nats://127.0.0.1:4222]", nil},
		{"nats max_payload", "type: nats\nurls: [nats://127.0.0.1:4222]\nmax_payload: 8MiB", nil},
		{"nats negative max_payload", "type: nats\nurls: [nats://127.0.0.1:4222]\nmax_payload: -1", []string{"sinks.s.max_payload"}},
		{"nats with an mqtt key", "type: nats\nurls: [nats://127.0.0.1:4222]\nmax_packet_size: 1MiB", []string{"sinks.s.max_packet_size"}},
		{"nats without urls", "type: nats", []string{"sinks.s.urls"}},
		{"nats bad url", "type: nats\nurls: [tcp://127.0.0.1:4222]", []string{"sinks.s.urls[0]"}},
		{"nats with a stream", "type: nats\nurls: [nats://127.0.0.1:4222]\nstream: {name: S}", []string{"sinks.s.stream"}},
		{"jetstream", "type: jetstream\nurls: [nats://127.0.0.1:4222]\nstream: {name: S, create: true, subjects: [a.>]}", nil},
		{"jetstream without a stream", "type: jetstream\nurls: [nats://127.0.0.1:4222]", []string{"sinks.s.stream.name"}},
		{"jetstream bad storage", "type: jetstream\nurls: [nats://127.0.0.1:4222]\nstream: {name: S, storage: tape}", []string{"sinks.s.stream.storage"}},
		{"mqtt", "type: mqtt\nurl: tcp://127.0.0.1:1883\nclient_id: firehose-dc1", nil},
		{"mqtt largest packet", "type: mqtt\nurl: tcp://127.0.0.1:1883\nclient_id: c\nmax_packet_size: 268435460", nil},
		{"mqtt over the largest packet", "type: mqtt\nurl: tcp://127.0.0.1:1883\nclient_id: c\nmax_packet_size: 268435461", []string{"sinks.s.max_packet_size"}},
		{"mqtt with a nats key", "type: mqtt\nurl: tcp://127.0.0.1:1883\nclient_id: c\nmax_payload: 1MiB", []string{"sinks.s.max_payload"}},
		{"mqtt zero reconnect", "type: mqtt\nurl: tcp://127.0.0.1:1883\nclient_id: c\nmax_reconnect_interval: 0s", []string{"sinks.s.max_reconnect_interval"}},
		{"mqtt without url or client_id", "type: mqtt", []string{"sinks.s.url", "sinks.s.client_id"}},
		{"mqtt bad tls", "type: mqtt\nurl: ssl://127.0.0.1:8883\nclient_id: c\ntls: {cert_file: c.pem}", []string{"sinks.s.tls.cert_file"}},
		{"no type", "urls: [nats://127.0.0.1:4222]", []string{"sinks.s.type"}},
		{"not a type", "type: kafka\nurls: [nats://127.0.0.1:4222]", []string{"sinks.s.type"}},
		{"empty entry", "", []string{"sinks.s.type"}},
		{"type given twice", "type: nats\ntype: mqtt\nurls: [nats://127.0.0.1:4222]", []string{"sinks.s.type"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doc := "sinks:\n  s:\n"
			for _, l := range strings.Split(tt.entry, "\n") {
				doc += "    " + l + "\n"
			}
			_, keys := decode(t, doc)
			if strings.Join(keys, " ") != strings.Join(tt.keys, " ") {
				t.Errorf("problems at %q, want %q", keys, tt.keys)
			}
		})
	}
}

func TestDefaultsAndLimits(t *testing.T) {
	f, keys := decode(t, `
sinks:
  core: {type: nats, urls: [nats://127.0.0.1:4222]}
  js: {type: jetstream, urls: [nats://127.0.0.1:4222], max_payload: 8MiB, stream: {name: S, subjects: [a.>]}}
  ext: {type: mqtt, url: tcp://127.0.0.1:1883, client_id: c}
`)
	if keys != nil {
		t.Fatal(keys)
	}
	core, js, ext := f.Sinks["core"], f.Sinks["js"], f.Sinks["ext"]
	if core.Type != sinkconfig.TypeNATS || core.NATS == nil || core.MQTT != nil || core.NATS.ConnectionName != "firehose-bridge" || core.NATS.ConfirmTimeout != 5*time.Second {
		t.Errorf("core: %+v %+v", core, core.NATS)
	}
	if js.NATS == nil || js.NATS.Type != sinkconfig.TypeJetStream || js.NATS.MaxPending != 4096 || js.NATS.Stream.Storage != "file" || js.NATS.Stream.DuplicateWindow != 2*time.Hour {
		t.Errorf("js: %+v", js.NATS)
	}
	if ext.MQTT == nil || ext.NATS != nil || ext.MQTT.MaxReconnectInterval != 30*time.Second {
		t.Errorf("ext: %+v", ext)
	}
	if lim := core.ConfiguredLimit("core"); lim.Bytes != 1<<20 || !strings.Contains(lim.From, "default") {
		t.Errorf("NATS default: %+v", lim)
	}
	if lim := js.ConfiguredLimit("js"); lim.Bytes != 8<<20 || lim.From != "sinks.js.max_payload" {
		t.Errorf("NATS max_payload: %+v", lim)
	}
	if lim := ext.ConfiguredLimit("ext"); lim.Bytes != 1<<20 || lim.From != "sinks.ext.max_packet_size" {
		t.Errorf("MQTT default: %+v", lim)
	}
	streamOf := sinkconfig.StreamSubjects(f.Sinks)
	if name, subjects := streamOf("js"); name != "S" || len(subjects) != 1 {
		t.Errorf("js stream: %q %q", name, subjects)
	}
	for _, n := range []string{"core", "ext", "none"} {
		if _, subjects := streamOf(n); subjects != nil {
			t.Errorf("%s: stream subjects %q", n, subjects)
		}
	}
}
