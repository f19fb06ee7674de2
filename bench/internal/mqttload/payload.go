package mqttload

import "encoding/binary"

// Payload layout written by publishers (little endian):
//
//	[0:8)   send timestamp, UnixNano, patched in when the packet is encoded
//	[8:16)  sequence number within the publisher (0, 1, 2, ...)
//	[16:20) publisher index
//	[20:24) run id (distinguishes measurements)
//	[24:)   filler
//
// The client patches the first two fields; NewPayload fills in the rest.

// MinPayload is the smallest payload that holds the layout.
const MinPayload = 24

// NewPayload returns a publish template of size bytes (at least MinPayload)
// for publisher pub in run runID, filled with letters after the header.
func NewPayload(size, pub int, runID uint32) []byte {
	payload := make([]byte, max(size, MinPayload))
	for j := MinPayload; j < len(payload); j++ {
		payload[j] = byte('a' + j%26)
	}
	binary.LittleEndian.PutUint32(payload[16:], uint32(pub))
	binary.LittleEndian.PutUint32(payload[20:], runID)
	return payload
}

// Header is the decoded start of a payload.
type Header struct {
	SentAt int64 // UnixNano
	Seq    uint64
	Pub    uint32
	RunID  uint32
}

// ParsePayload decodes the header of a payload; false if it is too short.
func ParsePayload(b []byte) (Header, bool) {
	if len(b) < MinPayload {
		return Header{}, false
	}
	return Header{
		SentAt: int64(binary.LittleEndian.Uint64(b[0:])),
		Seq:    binary.LittleEndian.Uint64(b[8:]),
		Pub:    binary.LittleEndian.Uint32(b[16:]),
		RunID:  binary.LittleEndian.Uint32(b[20:]),
	}, true
}
