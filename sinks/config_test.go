package sinks_test

import (
	"errors"
	"testing"
	"time"

	"github.com/opsfirehose/firehose/sinks"
	"github.com/opsfirehose/firehose/strictyaml"
)

func TestMQTTSinkNeedsAPositiveMaxReconnectInterval(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		var c sinks.Config
		c.SetDefaults()
		c.Type, c.URL, c.ClientID, c.MaxReconnectInterval = sinks.TypeMQTT, "tcp://127.0.0.1:1883", "firehose-dc1", d
		err := c.Validate()
		var ke *strictyaml.KeyError
		if !errors.As(err, &ke) || ke.Key != "max_reconnect_interval" {
			t.Errorf("max_reconnect_interval %v: %v, want a problem at max_reconnect_interval", d, err)
		}
	}
	var c sinks.Config
	c.SetDefaults()
	c.Type, c.URL, c.ClientID = sinks.TypeMQTT, "tcp://127.0.0.1:1883", "firehose-dc1"
	if err := c.Validate(); err != nil {
		t.Errorf("the default: %v", err)
	}
}
