// Package mqttload generates MQTT load for the benchmarks under bench/: a
// minimal MQTT 3.1.1 client built for throughput, a QoS 0/1 publisher with
// a bounded in-flight window that maps every PUBACK back to its message,
// publishers that each publish a fixed count from one start (Counted:
// mqtt-benchmark's shape with a window of 1), the payload layout publishers
// and subscribers agree on, and a readiness probe.
//
// The client does just enough for a load generator: CONNECT/CONNACK
// (username/password, clean session), PUBLISH at QoS 0/1, PUBACK in both
// directions, SUBSCRIBE/SUBACK, PINGREQ/PINGRESP and DISCONNECT. It is
// written for throughput, because the generator shares the machine's cores
// with the server under test:
//   - one reader goroutine per connection parses packets straight out of a
//     bufio.Reader (Peek/Discard, no per-packet allocation);
//   - one writer goroutine per connection encodes small outMsg values taken
//     from a channel into a bufio.Writer and flushes only when the channel is
//     empty, so many packets share one write(2) under load;
//   - PUBACKs for QoS 1 deliveries are written by the reader goroutine itself
//     as soon as it has processed every complete packet one read returned
//     (before it could block on the next read), all in one write;
//   - PUBLISH payloads are patched in place (timestamp, sequence) in a
//     per-connection template, so publishing does not allocate either;
//     a publisher can instead send messages of their own topic and payload,
//     retained or not (Publisher.SetMessages), such as a fleet's statuses.
//
// It is not a general MQTT client: no QoS 2, no MQTT 5, no reconnects, no
// persistent sessions. Tests of the bridge use paho; this package is for
// measuring.
package mqttload
