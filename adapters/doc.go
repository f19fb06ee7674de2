// Package adapters holds one package per event source (chef, ansible,
// configdb, gerrit, launchpad, subunit). Each turns its source's HTTP requests
// into bus messages: it authenticates, parses, validates against payloads/,
// builds topics with topics/ and publishes through a bus.Publisher. It answers
// 2xx only once the publisher has made every message safe.
//
// Adapters must not make topics by hand, talk to a broker directly, or know
// about routes and sinks.
package adapters
