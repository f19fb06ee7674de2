// Package testsubunit writes subunit v2 packets, so that tests can make
// streams of any size or shape without python-subunit. It is imported only
// by tests.
package testsubunit

import (
	"encoding/binary"
	"hash/crc32"
	"io"
	"strconv"

	"github.com/opsfirehose/firehose/payloads/subunit"
)

// Packet appends one packet with a test id and a status (no timestamp,
// tags, file or route code) to dst.
func Packet(dst []byte, id string, status subunit.Status) []byte {
	flags := uint16(subunit.Version)<<12 | uint16(subunit.FlagTestID) | uint16(status)
	idField := appendNumber(nil, uint32(len(id)))
	idField = append(idField, id...)
	// The length counts the whole packet, the bytes of the length included.
	base := 1 + 2 + len(idField) + 4
	length := base + 1
	for n := 1; len(appendNumber(nil, uint32(base+n))) != n; n++ {
		length = base + n + 1
	}
	start := len(dst)
	dst = append(dst, subunit.Signature)
	dst = binary.BigEndian.AppendUint16(dst, flags)
	dst = appendNumber(dst, uint32(length))
	dst = append(dst, idField...)
	return binary.BigEndian.AppendUint32(dst, crc32.ChecksumIEEE(dst[start:]))
}

// appendNumber writes a subunit variable-length number (1 to 3 bytes here).
func appendNumber(dst []byte, v uint32) []byte {
	switch {
	case v < 1<<6:
		return append(dst, byte(v))
	case v < 1<<14:
		return append(dst, 0x40|byte(v>>8), byte(v))
	default:
		return append(dst, 0x80|byte(v>>16), byte(v>>8), byte(v))
	}
}

// Stream is a subunit v2 stream of at most Size bytes (as many whole
// packets as fit), made as it is read: test number i gets the id Prefix+i
// and the packets that Each gives (for example one "inprogress" packet,
// never finished).
type Stream struct {
	Size   int64
	Prefix string
	Each   func(dst []byte, id string) []byte

	sent int64
	n    int
	buf  []byte
}

func (s *Stream) Read(p []byte) (int, error) {
	if len(s.buf) == 0 {
		s.buf = s.Each(s.buf[:0], s.Prefix+strconv.Itoa(s.n))
		s.n++
		if s.sent+int64(len(s.buf)) > s.Size {
			s.buf = s.buf[:0]
			return 0, io.EOF
		}
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	s.sent += int64(n)
	return n, nil
}
