// Package mqttin holds the MQTT inputs of the router: what hands messages
// that MQTT clients publish to a broker to router.Router, before they are
// acknowledged. Hook does it in the publish path of the embedded broker (a
// mochi hook); Subscriber does it for an external broker (a paho client
// holding a shared subscription). The router itself imports neither MQTT
// library.
package mqttin
