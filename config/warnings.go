package config

import (
	"fmt"
	"sort"

	"github.com/opsfirehose/firehose/broker"
	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/sinks"
	"github.com/opsfirehose/firehose/topics"
)

// Warning is a setting that is valid but will surprise: the bridge runs
// with it, says so in its log, and `bridge check` prints it.
type Warning struct {
	// Key is the setting to change, as in "chef.max_body".
	Key string
	Msg string
}

func (w Warning) String() string { return w.Key + ": " + w.Msg }

// Warnings lists what `bridge check` warns about, with the limits the config
// gives the sinks (see SizeWarnings): a running bridge warns again once it
// knows a NATS server's own max_payload.
func (c *Config) Warnings() []Warning {
	return c.SizeWarnings(func(name string) (sinks.Limit, bool) {
		sc, ok := c.Sinks[name]
		if !ok {
			return sinks.Limit{}, false
		}
		return sc.ConfiguredLimit(name), true
	})
}

// SizeWarnings lists the inputs that take messages larger than a required
// route they may reach can deliver: an intake's max_body, or the embedded
// broker's max_packet_size (0: none), over the limit of a required route
// whose filters overlap the input's topics. Such a message is refused
// before its sender is answered (HTTP 413, MQTT 5 PUBACK 0x97; an MQTT
// 3.1.1 publish is acknowledged and dropped), so the setting promises more
// than the route can keep. limit gives a sink's limit; routes to sinks it
// has none for are left out.
func (c *Config) SizeWarnings(limit func(sink string) (sinks.Limit, bool)) []Warning {
	type input struct {
		key, prefix string
		max         bytesize.Size // 0: no limit
		refused     string
	}
	var inputs []input
	for _, in := range c.Intakes() {
		if in.Key != "configdb" && in.Enabled {
			inputs = append(inputs, input{in.Key + ".max_body", in.TopicPrefix, in.MaxBody, "answered 413"})
		}
	}
	if c.ConfigDB.Enabled {
		// A change's event carries the document the request wrote.
		inputs = append(inputs, input{"configdb.max_body", c.ConfigDB.TopicPrefix, bytesize.Size(c.ConfigDB.MaxBody), "a write whose event is refused for good"})
	}
	if c.Broker.Mode != broker.ModeExternal {
		inputs = append(inputs, input{"broker.max_packet_size", "", bytesize.Size(c.Broker.MaxPacketSize),
			"refused with 0x97 (MQTT 5) or acknowledged and dropped (MQTT 3.1.1)"})
	}
	var out []Warning
	for _, in := range inputs {
		for _, r := range c.Routes {
			if !r.Required {
				continue
			}
			lim, ok := limit(r.Sink)
			if !ok || lim.Bytes == 0 || in.max > 0 && int64(in.max) <= int64(lim.Bytes) || !reaches(r.Filters, in.prefix) {
				continue
			}
			what := "no limit"
			if in.max > 0 {
				what = in.max.String()
			}
			out = append(out, Warning{Key: in.key, Msg: fmt.Sprintf(
				"%s is over the %s limit of required route %s (sink %s: %s); a message over it is %s. "+
					"Lower %s, or raise the sink's limit", what, bytesize.Size(lim.Bytes), r.Name, r.Sink, lim.From, in.refused, in.key)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// reaches reports whether a route with these filters may take a message of
// an input whose topics start with prefix ("" for any topic).
func reaches(filters []string, prefix string) bool {
	for _, f := range filters {
		if prefix == "" || topics.Overlap(f, prefix+"/#") {
			return true
		}
	}
	return false
}
