package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/opsfirehose/firehose/config/configcore"
)

func TestEnvKeys(t *testing.T) {
	keys := EnvKeys()
	for name, key := range map[string]string{
		"FIREHOSE_HTTP_ADDRESS":               "http.address",
		"FIREHOSE_HTTP_ALLOW_UNAUTHENTICATED": "http.allow_unauthenticated",
		"FIREHOSE_LOG_LEVEL":                  "log.level",
		"FIREHOSE_DATA_DIR":                   "data_dir",
		"FIREHOSE_CHEF_MAX_BODY":              "chef.max_body",
		"FIREHOSE_CHEF_RESOURCE_STATUSES":     "chef.resource_statuses",
		"FIREHOSE_CONFIGDB_DSN":               "configdb.dsn",
		"FIREHOSE_CONFIGDB_DSN_FILE":          "configdb.dsn_file",
		"FIREHOSE_BROKER_EXTERNAL_URL":        "broker.external.url",
		"FIREHOSE_BROKER_EXTERNAL_PASSWORD":   "broker.external.password",
		"FIREHOSE_MQTT_ADDRESS":               MQTTAddress,
		"FIREHOSE_WS_ADDRESS":                 WSAddress,
	} {
		if keys[name] != key {
			t.Errorf("%s sets %q, want %q", name, keys[name], key)
		}
	}
	// Lists of sections and maps have no variables; the relay's and the
	// ConfigDB client's variables are not keys.
	for _, name := range []string{"FIREHOSE_ROUTES", "FIREHOSE_SINKS", "FIREHOSE_HTTP_TOKENS", "FIREHOSE_URL", "FIREHOSE_TOKEN", "FIREHOSE_CONFIG", "FIREHOSE_CONFIGDB_URL", "FIREHOSE_CONFIGDB_TOKEN"} {
		if k, ok := keys[name]; ok {
			t.Errorf("%s is an override of %q", name, k)
		}
	}
	// No two keys share a variable ("a.b_c" and "a_b.c" would).
	seen := map[string]string{}
	for _, key := range configcore.ScalarKeys(reflect.TypeFor[Config](), "") {
		if other, dup := seen[EnvName(key)]; dup {
			t.Errorf("%s and %s share %s", key, other, EnvName(key))
		}
		seen[EnvName(key)] = key
	}
}

func TestOverrides(t *testing.T) {
	file := `
http: {address: "127.0.0.1:1"}
configdb:
  dsn_file: /nonexistent
broker:
  listeners:
    - {name: tls, type: tcp, address: ":8883", tls: null}
    - {name: mqtt, address: ":1883"}
`
	env := map[string]string{
		"FIREHOSE_HTTP_ADDRESS":           "127.0.0.1:2",
		"FIREHOSE_SHUTDOWN_TIMEOUT":       "3s",
		"FIREHOSE_CONFIGDB_DSN":           "postgres://h/${NOT_EXPANDED}",
		"FIREHOSE_CHEF_RESOURCE_STATUSES": "[updated, skipped]",
		"FIREHOSE_LOG_LEVEL":              "debug",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	ovs := append(EnvOverrides(lookup),
		Override{Key: "http.address", Value: "127.0.0.1:3", Source: "--http-address"},
		Override{Key: WSAddress, Value: "", Source: "--ws-address"},
		Override{Key: MQTTAddress, Value: "127.0.0.1:4", Source: "--mqtt-address"})
	cfg := Default()
	if err := Parse([]byte(file), &cfg, Options{LookupEnv: lookup, Overrides: ovs}); err != nil {
		t.Fatal(err)
	}
	if cfg.HTTP.Address != "127.0.0.1:3" || cfg.ShutdownTimeout != 3*time.Second || cfg.ConfigDB.DSN != "postgres://h/${NOT_EXPANDED}" ||
		strings.Join(cfg.Chef.ResourceStatuses, ",") != "updated,skipped" || cfg.Log.Level != "debug" {
		t.Fatalf("%+v", cfg)
	}
	// The first plain tcp listener moved (a null tls is no TLS); no websocket was added.
	if len(cfg.Broker.Listeners) != 2 || cfg.Broker.Listeners[0].Address != "127.0.0.1:4" || cfg.Broker.Listeners[1].Address != ":1883" {
		t.Fatalf("%+v", cfg.Broker.Listeners)
	}

	// With no file, the defaults' listeners are the ones changed.
	cfg = Default()
	if err := Parse(nil, &cfg, Options{Overrides: []Override{{Key: WSAddress, Value: "", Source: "--ws-address"}}}); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Broker.Listeners) != 1 || cfg.Broker.Listeners[0].Name != "mqtt" {
		t.Fatalf("%+v", cfg.Broker.Listeners)
	}

	cfg = Default()
	err := Parse([]byte("http: [1]\n"), &cfg, Options{Overrides: []Override{{Key: "http.address", Value: "x", Source: "FIREHOSE_HTTP_ADDRESS"}}})
	if err == nil || !strings.Contains(err.Error(), "FIREHOSE_HTTP_ADDRESS") {
		t.Fatalf("%v", err)
	}
}
