package broker

import (
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// protocolHook puts right what mochi writes where MQTT says otherwise. It
// changes packets on their way to the encoder (OnPacketEncode), so they
// still leave through mochi's own writer.
type protocolHook struct {
	mqtt.HookBase
	maxPacketSize uint32
	maxTopicAlias uint16
}

// ID names the hook in mochi's logs.
func (h *protocolHook) ID() string { return "firehose-protocol" }

// Provides lists the events the hook handles.
func (h *protocolHook) Provides(b byte) bool { return b == mqtt.OnPacketEncode }

// OnPacketEncode announces the limits an MQTT 5 client must keep to in
// CONNACK (mochi announces neither Maximum Packet Size nor Topic Alias
// Maximum), and gives PUBACKs a PUBACK reason code: mochi builds a
// successful one with QoS 1's "granted" code, 0x01, which is not one.
//
// To an MQTT 3.1.1 client, it turns the CONNACK mochi answers an empty
// client id with CleanSession 0 with, 0x80 (an MQTT 5 code: 3.1.1 has
// return codes 0 to 5), into 0x02, "identifier rejected" [MQTT-3.1.3-8]
// (mochi gave the client an id, which a CONNACK to 3.1.1 cannot carry).
//
// To an MQTT 3.1.1 client it sends no DISCONNECT at all: only 3.1.1's
// client sends one, and clients such as mosquitto_sub end with a protocol
// error on one from the server. mochi sends one when it shuts down or a
// session is taken over, and closes the connection right after
// (DisconnectClient), so the client gets the plain close that 3.1.1 allows
// (and mosquitto gives). The packet is made one mochi cannot encode, which
// its writer refuses without writing a byte; an MQTT 5 client still gets
// its reason code (0x8B "server shutting down").
func (h *protocolHook) OnPacketEncode(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	switch pk.FixedHeader.Type {
	case packets.Connack:
		if pk.ProtocolVersion < 5 {
			if pk.ReasonCode == packets.ErrUnspecifiedError.Code && cl.Properties.Props.AssignedClientID != "" && !cl.Properties.Clean {
				pk.ReasonCode = packets.Err3ClientIdentifierNotValid.Code
			}
		}
		if pk.ReasonCode < packets.ErrUnspecifiedError.Code {
			pk.Properties.MaximumPacketSize = h.maxPacketSize
			pk.Properties.TopicAliasMaximum = h.maxTopicAlias
		}
	case packets.Disconnect:
		if pk.ProtocolVersion < 5 {
			pk.FixedHeader.Type = packets.Reserved
		}
	case packets.Puback:
		if pk.ReasonCode == packets.CodeGrantedQos1.Code {
			pk.ReasonCode = packets.CodeSuccess.Code
		}
	}
	return pk
}
