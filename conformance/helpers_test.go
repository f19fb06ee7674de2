package conformance

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"
)

func execCommand(name string, args ...string) ([]byte, error) {
	return exec.Command(name, args...).CombinedOutput()
}

// pubClient connects the publisher account with a clean session.
func (t *T) pubClient(v byte) *Client {
	t.Helper()
	c, _ := t.Dial(Options{Version: v, ClientID: t.ID("pub"), Clean: true})
	return c
}

// subClient connects the publisher account (which may read everything)
// with a clean session and subscribes it.
func (t *T) subClient(v byte, subs ...Sub) *Client {
	t.Helper()
	c, _ := t.Dial(Options{Version: v, ClientID: t.ID("sub"), Clean: true})
	c.MustSubscribe(subs...)
	return c
}

// sessionProps asks MQTT 5 for a session that outlives the connection
// (and is harmless on 3.1.1, whose Clean flag decides).
func sessionProps(v byte, seconds uint32) packets.Properties {
	if v != v5 {
		return packets.Properties{}
	}
	return packets.Properties{SessionExpiryInterval: seconds, SessionExpiryIntervalFlag: true}
}

// markerSeq makes barrier markers unique within the run.
var markerSeq atomic.Int64

func nextMarker() string {
	return fmt.Sprintf("marker-%d", markerSeq.Add(1))
}

// barrier publishes a QoS 1 marker to topic, which sub must be subscribed
// to, waits until sub has it, and returns what sub received since from
// (an index into its messages) and before the marker. A server handles one
// connection's publishes in order and delivers a subscriber's messages in
// order, so anything that was going to reach sub from an earlier publish
// by pub is in the result: this is how the suite checks that something did
// NOT arrive, without waiting for time to pass. The marker must come from
// the connection that published what is checked: a server may acknowledge
// a publish before it has queued it for subscribers (mochi does, at QoS 1),
// so a marker from another connection may overtake it. (Where the publish
// in question comes from another client, e.g. a refused one, a late copy
// could only make the check miss a failure, never invent one.)
func barrier(t *T, pub, sub *Client, topic string, from int) []Message {
	t.Helper()
	marker := nextMarker()
	pub.Publish(Pub{Topic: topic, Payload: []byte(marker), QoS: 1})
	before, _ := sub.WaitPayload(marker)
	if from > len(before) {
		from = len(before)
	}
	return before[from:]
}

// payloads lists the payloads of msgs, for messages.
func payloads(msgs []Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Payload))
	}
	return out
}

// sameMessages reports whether msgs have exactly these payloads, in any
// order: MQTT orders messages only per topic and QoS [MQTT-4.6.0-6].
func sameMessages(msgs []Message, want ...string) bool {
	got := payloads(msgs)
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	return slices.Equal(got, want)
}

// without drops the barrier markers from msgs.
func without(msgs []Message) []Message {
	var out []Message
	for _, m := range msgs {
		if !strings.HasPrefix(string(m.Payload), "marker-") {
			out = append(out, m)
		}
	}
	return out
}

// qosSet lists the QoS levels of msgs, sorted.
func qosSet(msgs []Message) []byte {
	var out []byte
	for _, m := range msgs {
		out = append(out, m.QoS)
	}
	slices.Sort(out)
	return out
}

// userProps are the Paho suite's user properties.
var userProps = []packets.UserProperty{{Key: "a", Val: "2"}, {Key: "c", Val: "3"}}

// sleepPast waits until the clock has passed at. Only the protocol's own
// timers (keepalive, will delay, session and message expiry) wait this
// way: there the condition is the clock itself, and a slow machine only
// makes more time pass, in the direction the check expects.
func sleepPast(at time.Time) {
	time.Sleep(time.Until(at))
}

// validAckCodes are the reason codes MQTT 5 allows in each acknowledgement.
var validAckCodes = map[byte][]byte{
	packets.Puback:  {0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99},
	packets.Pubrec:  {0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99},
	packets.Pubcomp: {0x00, 0x92},
}

// checkAck fails the check when an MQTT 5 acknowledgement carries a reason
// code its packet type does not have, or echoes the publisher's user
// properties.
func checkAck(t *T, what string, ack packets.Packet, sent []packets.UserProperty) {
	t.Helper()
	if !slices.Contains(validAckCodes[ack.FixedHeader.Type], ack.ReasonCode) {
		t.Errorf("%s: reason code 0x%02x is not one a %s may carry", what, ack.ReasonCode, packetName(ack.FixedHeader.Type))
	}
	for _, up := range ack.Properties.User {
		if slices.Contains(sent, up) {
			t.Errorf("%s: echoes the publisher's user property %s=%s", what, up.Key, up.Val)
		}
	}
}

func packetName(typ byte) string {
	if name, ok := packets.PacketNames[typ]; ok {
		return strings.ToUpper(name)
	}
	return fmt.Sprintf("packet type %d", typ)
}
