package subunit

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"time"
	"unicode/utf8"
)

// Signature is the first byte of every subunit v2 packet.
const Signature = 0xB3

// Version is the only packet version: the top nibble of the flags.
const Version = 0x2

// MaxPacket is the largest packet: its length is at most a 3-byte number.
const MaxPacket = 1<<22 - 1

// Flag is one of the presence bits of a packet's flags.
type Flag uint16

// Packet flags, as python-subunit's subunit/v2.py defines them. The low three
// bits are the Status.
const (
	FlagTestID      Flag = 0x0800
	FlagRouteCode   Flag = 0x0400
	FlagTimestamp   Flag = 0x0200
	FlagRunnable    Flag = 0x0100
	FlagTags        Flag = 0x0080
	FlagFileContent Flag = 0x0040
	FlagMIMEType    Flag = 0x0020
	FlagEOF         Flag = 0x0010
	statusMask           = 0x0007
)

// Status is a test's status in a packet.
type Status uint8

// Statuses, with python-subunit's values. StatusUndefined means the packet
// says nothing about the test's status (a file attachment, say).
const (
	StatusUndefined Status = iota
	StatusExists
	StatusInProgress
	StatusSuccess
	StatusUXSuccess
	StatusSkip
	StatusFail
	StatusXFail
)

var statusNames = [...]string{"", "exists", "inprogress", "success", "uxsuccess", "skip", "fail", "xfail"}

// String is the status as python-subunit names it; "" for StatusUndefined.
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "status(" + strconv.Itoa(int(s)) + ")"
}

// Interim reports whether the status leaves the test unfinished, as
// testtools' INTERIM_STATES do (no status, or inprogress).
func (s Status) Interim() bool { return s == StatusUndefined || s == StatusInProgress }

// Packet is one decoded packet. Strings are copies; File aliases the
// Reader's buffer and is valid only until the next call to Next.
type Packet struct {
	// Flags are the packet's raw flags: version, presence bits and status.
	Flags     uint16
	Status    Status
	Timestamp time.Time // zero unless FlagTimestamp
	TestID    string
	Tags      []string
	MIMEType  string
	FileName  string
	File      []byte
	RouteCode string
	// Offset is the byte offset of the packet's signature in the stream.
	Offset int64
	// Length is the packet's length in bytes, signature and CRC included.
	Length int
}

// Has reports whether the packet carries f.
func (p *Packet) Has(f Flag) bool { return p.Flags&uint16(f) != 0 }

// ErrFormat is wrapped by every *FormatError.
var ErrFormat = errors.New("not a valid subunit v2 stream")

// Position locates the packet at fault in a stream, for the errors of
// Reader and Summarize.
type Position struct {
	// Offset is the byte offset of the packet (or of the stray byte).
	Offset int64
	// Packet is the 0-based index of the packet.
	Packet int
}

// String returns "subunit v2 packet N at byte M", which starts the errors'
// messages.
func (p Position) String() string {
	return fmt.Sprintf("subunit v2 packet %d at byte %d", p.Packet, p.Offset)
}

// FormatError says where and why a stream is not subunit v2.
type FormatError struct {
	Position
	Reason string
}

// Error returns "subunit v2 packet N at byte M: reason".
func (e *FormatError) Error() string { return e.Position.String() + ": " + e.Reason }

// Unwrap returns ErrFormat.
func (e *FormatError) Unwrap() error { return ErrFormat }

// Reader reads packets from a subunit v2 byte stream. It is strict: every
// byte must belong to a packet with the right signature, version, length and
// CRC32, so content that is not subunit (such as a test's stray stdout,
// which python-subunit's tools can wrap as "stdout" attachments) is an error.
// Memory is bounded by the largest packet, 4 MiB, and grows with the bytes
// that arrive, not with the lengths packets claim.
type Reader struct {
	r      *bufio.Reader
	offset int64
	n      int
	buf    []byte
	p      Packet
}

// NewReader reads packets from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next packet, io.EOF at the clean end of the stream, a
// *FormatError for a stream that is not valid subunit v2, or the underlying
// reader's error, wrapped. The packet is valid until the next call.
func (r *Reader) Next() (*Packet, error) {
	start := r.offset
	fail := func(format string, args ...any) (*Packet, error) {
		return nil, &FormatError{Position: Position{Offset: start, Packet: r.n}, Reason: fmt.Sprintf(format, args...)}
	}
	sig, err := r.r.ReadByte()
	if errors.Is(err, io.EOF) {
		return nil, io.EOF
	}
	if err != nil {
		return nil, fmt.Errorf("reading subunit stream: %w", err)
	}
	if sig != Signature {
		return fail("byte 0x%02X where a packet should start (0x%02X); the stream must be subunit v2 only", sig, Signature)
	}
	// Flags (2 bytes) and the first byte of the length tell the length's size.
	var head [6]byte
	head[0] = sig
	if _, err := io.ReadFull(r.r, head[1:4]); err != nil {
		return r.short(start, err, 4)
	}
	flags := binary.BigEndian.Uint16(head[1:3])
	// The top two bits of a number give its size; a length may not use the
	// 4-byte form, which python-subunit refuses too.
	form := head[3] >> 6
	if form == 3 {
		return fail("the packet length uses the 4-byte form; a packet is at most %d bytes", MaxPacket)
	}
	lenSize := int(form) + 1
	if _, err := io.ReadFull(r.r, head[4:3+lenSize]); err != nil {
		return r.short(start, err, 3+lenSize)
	}
	length := int(head[3] & 0x3f)
	for _, b := range head[4 : 3+lenSize] {
		length = length<<8 | int(b)
	}
	headerLen := 3 + lenSize
	if length < headerLen+4 {
		return fail("packet length %d is shorter than its header and CRC (%d bytes)", length, headerLen+4)
	}
	if v := flags >> 12; v != Version {
		return fail("version %d; only subunit v2 (version %d) is supported", v, Version)
	}
	rest := length - headerLen
	if err := r.readBody(rest); err != nil {
		return r.short(start, err, length)
	}
	body, sum := r.buf[:rest-4], binary.BigEndian.Uint32(r.buf[rest-4:])
	crc := crc32.Update(crc32.ChecksumIEEE(head[:headerLen]), crc32.IEEETable, body)
	if crc != sum {
		return fail("bad CRC32: computed 0x%08X, packet says 0x%08X", crc, sum)
	}
	p := &r.p
	*p = Packet{Flags: flags, Status: Status(flags & statusMask), Offset: start, Length: length, Tags: p.Tags[:0]}
	if err := p.decode(body); err != nil {
		return fail("%v", err)
	}
	r.offset += int64(length)
	r.n++
	return p, nil
}

// firstChunk is the most readBody allocates before the bytes arrive.
const firstChunk = 64 << 10

// readBody reads the n bytes of a packet after its header into r.buf. The
// buffer grows with the bytes that arrive, never from the length the packet
// claims: a stream that claims a 4 MiB packet and stops costs what it sent.
func (r *Reader) readBody(n int) error {
	r.buf = r.buf[:0]
	for len(r.buf) < n {
		if len(r.buf) == cap(r.buf) {
			next := make([]byte, len(r.buf), min(n, max(2*cap(r.buf), firstChunk)))
			copy(next, r.buf)
			r.buf = next
		}
		end := min(n, cap(r.buf))
		if _, err := io.ReadFull(r.r, r.buf[len(r.buf):end]); err != nil {
			return err
		}
		r.buf = r.buf[:end]
	}
	return nil
}

// short reports a stream that ends inside a packet, or a read error.
func (r *Reader) short(start int64, err error, want int) (*Packet, error) {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, &FormatError{Position: Position{Offset: start, Packet: r.n},
			Reason: fmt.Sprintf("the stream ends inside a packet that needs at least %d bytes", want)}
	}
	return nil, fmt.Errorf("reading subunit stream: %w", err)
}

// decode reads the optional fields in the order v2.py writes them. Bytes
// after the last field are ignored, as python-subunit ignores them.
func (p *Packet) decode(b []byte) error {
	d := decoder{b: b}
	if p.Has(FlagTimestamp) {
		if len(d.b) < 4 {
			return errors.New("timestamp: packet too short")
		}
		secs := binary.BigEndian.Uint32(d.b)
		d.b = d.b[4:]
		nanos, err := d.number("timestamp nanoseconds")
		if err != nil {
			return err
		}
		p.Timestamp = time.Unix(int64(secs), int64(nanos)).UTC()
	}
	var err error
	if p.Has(FlagTestID) {
		if p.TestID, err = d.text("test id"); err != nil {
			return err
		}
	}
	if p.Has(FlagTags) {
		count, err := d.number("tag count")
		if err != nil {
			return err
		}
		// Each tag takes at least its length byte, which bounds the count
		// before anything is allocated.
		if int(count) > len(d.b) {
			return fmt.Errorf("tag count %d is more than the packet can hold", count)
		}
		for i := 0; i < int(count); i++ {
			tag, err := d.text("tag")
			if err != nil {
				return err
			}
			p.Tags = append(p.Tags, tag)
		}
	}
	if p.Has(FlagMIMEType) {
		if p.MIMEType, err = d.text("mime type"); err != nil {
			return err
		}
	}
	if p.Has(FlagFileContent) {
		if p.FileName, err = d.text("file name"); err != nil {
			return err
		}
		if p.File, err = d.bytes("file content"); err != nil {
			return err
		}
	}
	if p.Has(FlagRouteCode) {
		if p.RouteCode, err = d.text("route code"); err != nil {
			return err
		}
	}
	return nil
}

type decoder struct{ b []byte }

// number reads a subunit variable-length number: the top two bits of the
// first byte give its size (1 to 4 bytes), the other 6 bits are its high
// bits, big-endian.
func (d *decoder) number(what string) (uint32, error) {
	if len(d.b) == 0 {
		return 0, fmt.Errorf("%s: packet too short", what)
	}
	size := int(d.b[0]>>6) + 1
	if len(d.b) < size {
		return 0, fmt.Errorf("%s: packet too short for a %d-byte number", what, size)
	}
	v := uint32(d.b[0] & 0x3f)
	for _, c := range d.b[1:size] {
		v = v<<8 | uint32(c)
	}
	d.b = d.b[size:]
	return v, nil
}

func (d *decoder) bytes(what string) ([]byte, error) {
	n, err := d.number(what + " length")
	if err != nil {
		return nil, err
	}
	if uint64(n) > uint64(len(d.b)) {
		return nil, fmt.Errorf("%s: %d bytes claimed, %d left in the packet", what, n, len(d.b))
	}
	b := d.b[:n]
	d.b = d.b[n:]
	return b, nil
}

// text reads a length-prefixed UTF-8 string, which may not hold NUL.
func (d *decoder) text(what string) (string, error) {
	b, err := d.bytes(what)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("%s is not UTF-8", what)
	}
	for _, c := range b {
		if c == 0 {
			return "", fmt.Errorf("%s contains a NUL byte", what)
		}
	}
	return string(b), nil
}
