// Package router fans messages out to sinks along configured routes. It sits
// in the publish path: a message is routed before its sender is told it is
// safe (an HTTP 2xx, an MQTT PUBACK). For each required route the message is
// confirmed by the sink or kept in the route's disk outbox, from which a
// replayer delivers it, in order, once the sink is back. Each sink says
// where a message goes in its namespace (sinks.Sink.Address). Publisher is
// the publish policy of the bridge's own messages: routes first, then the
// bus it is handed.
//
// A message's topic is checked once, where it enters: by Publisher for the
// adapters' messages (and a bus.CheckedPublisher bus is told so), by Route
// for MQTT publishers' (the hostile ones: a topic that fails reaches no
// sink). From there on the router and the sinks' Address trust it.
//
// The router must not publish on the MQTT bus itself, and must not know the
// sources of messages; Publisher hands them to the bus.Publisher it is
// given. It must not link a NATS client, paho or mochi: the
// sinks that do (sinks/nats, sinks/mqtt) reach it as sinks.Sink, and the
// MQTT inputs (mqttin) hand it bus.Messages.
package router
