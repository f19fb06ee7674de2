package conformance

// deviations records, per target, the behaviours it is known to fail, each
// with what it does instead and the point of issue 13 that tracks it (for
// mosquitto, whether Paho's own suite agrees). A recorded deviation that
// passes fails the suite ("strict xfail"): remove its line when the fix
// lands. Keys are the table's rows: "<3.1.1|5> <behaviour id>".
var deviations = map[string]map[string]string{
	targetBroker: {
		"3.1.1 zero-length-client-id":    "CONNACK 0x80 (an MQTT 5 code; 3.1.1 has return codes 0-5) instead of 0x02 for an empty client id with CleanSession 0 (issue 13: protocol-correct answers)",
		"3.1.1 denied-publish":           "a denied 3.1.1 publish is answered with a server DISCONNECT (e0 00) at QoS 1 and 2, and the connection is closed at QoS 0 (issue 13: no server DISCONNECT to 3.1.1 clients, a positive ack and drop)",
		"5 ack-codes-and-properties":     "PUBACK carries reason code 0x01, PUBACK and PUBREC echo the publisher's user properties (issue 13: valid reason codes, no echoed properties)",
		"5 connack-limits":               "CONNACK announces neither Topic Alias Maximum (yet aliases are accepted) nor Maximum Packet Size (issue 13: both announced)",
		"5 maximum-packet-size":          "CONNACK announces no Maximum Packet Size though broker.max_packet_size is set (issue 13: announced)",
		"5 flow-control-qos1":            "a Receive Maximum 20 subscriber stalls for good after 40 of 200 QoS 1 messages (issue 13: flow control that never stalls)",
		"3.1.1 packet-ids-per-direction": "mochi shares one packet id space between the directions: a SUBSCRIBE using the id of an unacknowledged delivery gets 0x91 (not even a 3.1.1 SUBACK code), and a PUBLISH with it deletes that delivery, which is then never resent (found by this suite; issue 13: protocol-correct answers)",
		"5 packet-ids-per-direction":     "as 3.1.1: SUBACK 0x91 (Packet Identifier in use) for an id only the server's delivery uses, and the delivery dropped by the client's PUBLISH with that id (found by this suite)",
	},
	targetBridge: {
		"3.1.1 zero-length-client-id":    "as the broker: CONNACK 0x80 instead of 0x02 (issue 13: protocol-correct answers)",
		"3.1.1 denied-publish":           "as the broker: a server DISCONNECT to a 3.1.1 client, or the connection closed (issue 13: no server DISCONNECT to 3.1.1 clients)",
		"5 ack-codes-and-properties":     "PUBREC echoes the publisher's user properties (the routed PUBACK does not) (issue 13: no echoed properties)",
		"5 connack-limits":               "as the broker: no Topic Alias Maximum, no Maximum Packet Size in CONNACK (issue 13)",
		"5 maximum-packet-size":          "as the broker: no Maximum Packet Size in CONNACK (issue 13)",
		"5 flow-control-qos1":            "as the broker: a Receive Maximum 20 subscriber stalls after 40 of 200 (issue 13: flow control)",
		"5 no-local":                     "a No Local subscriber gets its own publish back: the route re-injects it as the inline client (issue 13: No Local broken whenever a route exists)",
		"5 message-expiry":               "a message whose expiry passed while the subscriber was offline is still delivered (issue 13: message expiry holds on the routed path too)",
		"3.1.1 packet-ids-per-direction": "as the broker (mochi): one packet id space for both directions (found by this suite)",
		"5 packet-ids-per-direction":     "as the broker (mochi): one packet id space for both directions (found by this suite)",
	},
	targetMosquitto: {
		"3.1.1 overlapping-subscriptions": "mosquitto 2.0.11 sends one copy at QoS 1 for subscriptions at QoS 2 and 1 [MQTT-3.3.5-1]; Paho's test_overlapping_subscriptions fails on it too",
		"3.1.1 subscribe-failure":         "mosquitto 2.0.11 grants a subscription its ACL denies (SUBACK 0x02) and filters deliveries instead; Paho's test fails on it too",
		"5 subscribe-failure":             "as 3.1.1: SUBACK 0x02 for a subscription the ACL denies",
		"5 flow-control-qos1":             "mosquitto 2.0.11 respects Receive Maximum 20 until the first PUBACK, then sends 20 more at once (160 outstanding); everything arrives",
		"5 flow-control-qos2":             "as QoS 1: up to ~170 unacknowledged QoS 2 deliveries to a Receive Maximum 20 client",
		"5 server-receive-maximum":        "mosquitto 2.0.11 announces Receive Maximum 20 but does not disconnect (0x93) a client with 21 QoS 2 publishes unfinished; Paho's test_flow_control2 hangs on it",
		"5 will-delay":                    "with Session Expiry 0, mosquitto 2.0.11 waits the Will Delay Interval (60 s) instead of sending the will when the session ends; Paho's test_will_delay fails on it too",
	},
}
