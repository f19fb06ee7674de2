package broker

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/rs/zerolog"
)

// chunkConn is a net.Conn whose reads return the chunks given, one per
// Read (or less, if p is shorter), then io.EOF; it counts what it delivered.
type chunkConn struct {
	net.Conn
	chunks    [][]byte
	delivered int
}

func (c *chunkConn) Read(p []byte) (int, error) {
	for len(c.chunks) > 0 && len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	c.delivered += n
	return n, nil
}

func (c *chunkConn) SetDeadline(time.Time) error      { return nil }
func (c *chunkConn) SetReadDeadline(time.Time) error  { return nil }
func (c *chunkConn) SetWriteDeadline(time.Time) error { return nil }
func (c *chunkConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }

type span struct{ start, lenEnd, end int } // a packet: its start, the end of its length field, its end

// stream builds a CONNECT followed by packets of the given body sizes.
func stream(sizes []int) ([]byte, []span) {
	var b []byte
	var spans []span
	add := func(typ byte, body []byte) {
		start := len(b)
		var hdr bytes.Buffer
		(&packets.FixedHeader{Type: typ >> 4, Remaining: len(body)}).Encode(&hdr)
		b = append(b, hdr.Bytes()...)
		lenEnd := len(b)
		b = append(b, body...)
		spans = append(spans, span{start, lenEnd, len(b)})
	}
	add(0x10, []byte("\x00\x04MQTT\x05\x02\x00\x3c\x00\x00\x01c"))
	for i, n := range sizes {
		body := make([]byte, n)
		for j := range body {
			body[j] = byte(i + j)
		}
		add(0x30, body)
	}
	return b, spans
}

// FuzzGatedConn reads random packet streams, cut into random chunks,
// through the gate: mochi must get exactly the bytes sent, and never the
// end of a big packet's length field (after which it allocates the length)
// before all of that packet has arrived.
func FuzzGatedConn(f *testing.F) {
	f.Add(uint64(1), uint8(5), uint16(300))
	f.Add(uint64(2), uint8(40), uint16(7))
	f.Add(uint64(3), uint8(1), uint16(1))
	f.Fuzz(func(t *testing.T, seed uint64, packets uint8, maxChunk uint16) {
		r := rand.New(rand.NewPCG(seed, seed))
		sizes := make([]int, packets%50)
		for i := range sizes {
			switch r.IntN(3) {
			case 0:
				sizes[i] = r.IntN(100)
			case 1:
				sizes[i] = r.IntN(2000)
			default:
				sizes[i] = 2000 + r.IntN(70000)
			}
		}
		data, spans := stream(sizes)
		var chunks [][]byte
		for rest := data; len(rest) > 0; {
			n := 1 + r.IntN(int(maxChunk)+1)
			n = min(n, len(rest))
			chunks = append(chunks, rest[:n])
			rest = rest[n:]
		}
		cc := &chunkConn{chunks: chunks}
		g := &gate{connectTimeout: time.Second, maxConnect: 1024, hold: 1024, metrics: newMetrics(), log: zerolog.Nop()}
		gc, err := g.admit(cc)
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		for {
			p := make([]byte, 1+r.IntN(20000))
			n, err := gc.Read(p)
			got = append(got, p[:n]...)
			for _, s := range spans[1:] {
				if s.end-s.lenEnd > g.hold && len(got) >= s.lenEnd && cc.delivered < s.end {
					t.Fatalf("a packet of %d bytes: its length was handed over with %d of its bytes still to come",
						s.end-s.start, s.end-cc.delivered)
				}
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("mochi got %d bytes, %d were sent (equal prefix %d)", len(got), len(data), commonPrefix(got, data))
		}
	})
}

func commonPrefix(a, b []byte) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

func TestAdmit(t *testing.T) {
	g := &gate{connectTimeout: time.Second, maxConnect: 64, hold: 1024, metrics: newMetrics(), log: zerolog.Nop()}
	connect, _ := stream(nil)
	oneByOne := func(b []byte) *chunkConn {
		c := &chunkConn{}
		for i := range b {
			c.chunks = append(c.chunks, b[i:i+1])
		}
		return c
	}
	if gc, err := g.admit(oneByOne(connect)); err != nil || gc.version != 5 {
		t.Fatalf("a CONNECT sent byte by byte: %v, version %d", err, gc.version)
	}
	for name, tc := range map[string]struct {
		data []byte
		want error
	}{
		"not a CONNECT":  {[]byte{0x30, 0x02, 0, 1}, nil},
		"too large":      {[]byte{0x10, 65}, errConnectTooLarge},
		"claims 256 MiB": {hugeConnect, errConnectTooLarge},
		"malformed":      {[]byte{0x10, 0xff, 0xff, 0xff, 0xff, 0x01}, nil},
		"ends early":     {connect[:len(connect)-1], io.ErrUnexpectedEOF},
		"nothing at all": {nil, io.EOF},
		"ends in header": {[]byte{0x10, 0x80}, io.ErrUnexpectedEOF},
	} {
		_, err := g.admit(oneByOne(tc.data))
		if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", name, err, tc.want)
		}
	}
}

// TestCloseSendsWhatTheCorkHolds: mochi writes a DISCONNECT and closes the
// connection at once (DisconnectClient); when that happens while the
// router releases a batch (the connection corked), the DISCONNECT and the
// acks before it still reach the client. A Close while a writer is
// blocked on a peer that does not read returns, and unblocks it.
func TestCloseSendsWhatTheCorkHolds(t *testing.T) {
	pair := func() (*gatedConn, net.Conn) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		peer, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = peer.Close() })
		srv, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		return &gatedConn{Conn: srv}, peer
	}

	gc, peer := pair()
	acks := []byte{0x40, 0x02, 0, 1, 0x40, 0x02, 0, 2}
	disconnect := []byte{0xe0, 0x02, 0x93, 0}
	gc.cork()
	for _, p := range [][]byte{acks, disconnect} {
		if _, err := gc.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := gc.Close(); err != nil {
		t.Fatal(err)
	}
	gc.uncork() // as Batch does after the release that closed the connection
	_ = peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(peer)
	if err != nil {
		t.Fatalf("reading what the server sent: %v", err)
	}
	if want := append(append([]byte{}, acks...), disconnect...); !bytes.Equal(got, want) {
		t.Errorf("the client got % x, want % x", got, want)
	}

	gc, _ = pair() // the peer never reads
	done := make(chan error, 1)
	go func() {
		_, err := gc.Write(make([]byte, 64<<20))
		done <- err
	}()
	if err := gc.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("a write of 64 MiB to a peer that reads nothing succeeded after Close")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a write blocked on a peer that does not read is still blocked 30 s after Close")
	}
}

// writeLog is a chunkConn that records each Write, and how many reads had
// been made when it came.
type writeLog struct {
	*chunkConn
	reads  int
	writes [][]byte
	after  []int // reads made before each write
}

func (c *writeLog) Read(p []byte) (int, error) {
	c.reads++
	return c.chunkConn.Read(p)
}

func (c *writeLog) Write(p []byte) (int, error) {
	c.writes = append(c.writes, bytes.Clone(p))
	c.after = append(c.after, c.reads)
	return len(p), nil
}

// TestAcksOfOneReadLeaveTogether: what mochi writes while it handles
// packets that arrived in one read (the PUBACKs of a publisher's window)
// leaves in one write, before the connection waits for more; what it
// writes for a packet that arrived alone leaves at once.
func TestAcksOfOneReadLeaveTogether(t *testing.T) {
	publish := func(id byte) []byte { return []byte{0x32, 0x06, 0, 1, 'x', 0, id, 'p'} }
	ack := func(id byte) []byte { return []byte{0x40, 0x02, 0, id} }
	three := append(append(publish(1), publish(2)...), publish(3)...)
	conn := &writeLog{chunkConn: &chunkConn{chunks: [][]byte{three, publish(4)}}}
	gc := &gatedConn{Conn: conn, g: &gate{hold: 1 << 10}}
	buf := make([]byte, 4096)

	if n, err := gc.Read(buf); err != nil || !bytes.Equal(buf[:n], three) {
		t.Fatalf("first read: % x, %v; want the three publishes", buf[:n], err)
	}
	for id := byte(1); id <= 3; id++ {
		if _, err := gc.Write(ack(id)); err != nil {
			t.Fatal(err)
		}
	}
	if len(conn.writes) != 0 {
		t.Fatalf("%d writes while mochi still handled the packets of one read, want them held", len(conn.writes))
	}
	if n, err := gc.Read(buf); err != nil || !bytes.Equal(buf[:n], publish(4)) {
		t.Fatalf("second read: % x, %v; want the fourth publish", buf[:n], err)
	}
	want := append(append(ack(1), ack(2)...), ack(3)...)
	if len(conn.writes) != 1 || !bytes.Equal(conn.writes[0], want) || conn.after[0] != 1 {
		t.Fatalf("writes % x after reads %v; want one write of % x before the second read", conn.writes, conn.after, want)
	}
	if _, err := gc.Write(ack(4)); err != nil {
		t.Fatal(err)
	}
	if len(conn.writes) != 2 || !bytes.Equal(conn.writes[1], ack(4)) {
		t.Fatalf("the ack of a publish that came alone was not written at once: writes % x", conn.writes)
	}
}
