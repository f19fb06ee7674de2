// Package mqttlisteners names the embedded broker's listener types and its
// default listeners, so that what reads a config file (configcore fills the
// defaults in before it sets FIREHOSE_MQTT_ADDRESS) agrees with the broker
// without linking it.
//
// It must not import anything of the bridge's, the broker included: it is
// a leaf.
package mqttlisteners

// Listener types.
const (
	TCP       = "tcp"
	WebSocket = "websocket"
)

// Listener is one listener as the config file names it.
type Listener struct {
	Name, Type, Address string
}

// Defaults are the listeners the broker has when the config file lists none:
// MQTT on :1883, MQTT over WebSocket on :8083. Each call returns a new slice.
func Defaults() []Listener {
	return []Listener{
		{Name: "mqtt", Type: TCP, Address: ":1883"},
		{Name: "ws", Type: WebSocket, Address: ":8083"},
	}
}
