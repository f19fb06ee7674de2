package sinkconfig_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/strictyaml"
	"github.com/opsfirehose/firehose/sinks/sinkconfig"
)

func TestMQTTSinkNeedsAPositiveMaxReconnectInterval(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		var c sinkconfig.Config
		c.SetDefaults()
		c.Type, c.URL, c.ClientID, c.MaxReconnectInterval = sinkconfig.TypeMQTT, "tcp://127.0.0.1:1883", "firehose-dc1", d
		err := c.Validate()
		var ke *strictyaml.KeyError
		if !errors.As(err, &ke) || ke.Key != "max_reconnect_interval" {
			t.Errorf("max_reconnect_interval %v: %v, want a problem at max_reconnect_interval", d, err)
		}
	}
	var c sinkconfig.Config
	c.SetDefaults()
	c.Type, c.URL, c.ClientID = sinkconfig.TypeMQTT, "tcp://127.0.0.1:1883", "firehose-dc1"
	if err := c.Validate(); err != nil {
		t.Errorf("the default: %v", err)
	}
}

func TestSizeLimitKeys(t *testing.T) {
	for _, tt := range []struct {
		typ          string
		payload, pkt bytesize.Size
		key          string // "": valid
	}{
		{sinkconfig.TypeNATS, 0, 0, ""},
		{sinkconfig.TypeNATS, 8 * bytesize.MiB, 0, ""},
		{sinkconfig.TypeNATS, -1, 0, "max_payload"},
		{sinkconfig.TypeNATS, 0, bytesize.MiB, "max_packet_size"},
		{sinkconfig.TypeMQTT, 0, 0, ""},
		{sinkconfig.TypeMQTT, 0, sinkconfig.MaxMQTTPacket, ""},
		{sinkconfig.TypeMQTT, 0, sinkconfig.MaxMQTTPacket + 1, "max_packet_size"},
		{sinkconfig.TypeMQTT, bytesize.MiB, 0, "max_payload"},
	} {
		var c sinkconfig.Config
		c.SetDefaults()
		c.Type, c.MaxPayload, c.MaxPacketSize = tt.typ, tt.payload, tt.pkt
		if tt.typ == sinkconfig.TypeMQTT {
			c.URL, c.ClientID = "tcp://127.0.0.1:1883", "firehose-dc1"
		} else {
			c.URLs = []string{"nats://127.0.0.1:4222"}
		}
		err := c.Validate()
		var ke *strictyaml.KeyError
		if tt.key == "" && err != nil || tt.key != "" && (!errors.As(err, &ke) || ke.Key != tt.key) {
			t.Errorf("%s max_payload %d max_packet_size %d: %v, want a problem at %q", tt.typ, tt.payload, tt.pkt, err, tt.key)
		}
	}
	var c sinkconfig.Config
	if lim := c.ConfiguredLimit("js"); lim.Bytes != 1<<20 || !strings.Contains(lim.From, "default") {
		t.Errorf("NATS default: %+v", lim)
	}
	c.Type = sinkconfig.TypeMQTT
	if lim := c.ConfiguredLimit("ext"); lim.Bytes != 1<<20 || lim.From != "sinks.ext.max_packet_size" {
		t.Errorf("MQTT default: %+v", lim)
	}
}
