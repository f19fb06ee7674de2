// Package sinkconfig is the `sinks:` entry of the config file: one struct
// for every sink type, told apart by `type`, with its defaults, its checks
// (settings that do not apply to the type are refused by key) and the size
// limit it gives. It lives apart from sinks, which is the Sink contract
// alone, and from the sinks themselves, so that the config file, the
// router's checks of routes against sinks and `bridge check` read it without
// linking a client library.
//
// It must not import a NATS client, paho or mochi.
package sinkconfig
