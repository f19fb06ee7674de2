// Package subunit reads what the OpenStack subunit workers reported: the
// JSON result a worker posts, and subunit v2 test streams, which it parses
// packet by packet (signature, flags, variable-length numbers, CRC32) and
// summarises the way testtools does, to decide whether a build's tests
// passed.
//
// See README.md for the wire format. The package does no I/O beyond the
// io.Reader it is given, and publishes nothing.
package subunit
