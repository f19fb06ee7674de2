package mqttload

import (
	"bytes"
	"net"
	"testing"
	"time"
)

func TestPayloadRoundTrip(t *testing.T) {
	p := NewPayload(64, 7, 0xdeadbeef)
	if len(p) != 64 {
		t.Fatalf("len %d", len(p))
	}
	h, ok := ParsePayload(p)
	if !ok || h.Pub != 7 || h.RunID != 0xdeadbeef || h.Seq != 0 {
		t.Fatalf("header %+v ok %v", h, ok)
	}
	if p[63] != byte('a'+63%26) {
		t.Errorf("filler %q", p[MinPayload:])
	}
	if _, ok := ParsePayload(p[:MinPayload-1]); ok {
		t.Error("a short payload parsed")
	}
	if len(NewPayload(1, 0, 0)) != MinPayload {
		t.Error("NewPayload made a payload shorter than MinPayload")
	}
}

// scriptedConn is a connection whose peer sends input and then closes; it
// records what the client writes. (A loopback TCP connection per fuzz input
// would exhaust the machine's ephemeral ports.)
type scriptedConn struct {
	in  *bytes.Reader
	out bytes.Buffer
}

func (c *scriptedConn) Read(b []byte) (int, error)       { return c.in.Read(b) }
func (c *scriptedConn) Write(b []byte) (int, error)      { return c.out.Write(b) }
func (c *scriptedConn) Close() error                     { return nil }
func (c *scriptedConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *scriptedConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *scriptedConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptedConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptedConn) SetWriteDeadline(time.Time) error { return nil }

// readAll runs a client's read loop over input, as if a broker had sent it
// and closed the connection, and returns what the client wrote back and
// what it received.
func readAll(input []byte) (written []byte, pubs [][]byte, acks []uint16) {
	conn := &scriptedConn{in: bytes.NewReader(input)}
	c := newClient(conn, Options{QueueLen: 1, KeepAlive: time.Minute})
	c.OnPublish = func(_, payload []byte, _ byte, _ int64) { pubs = append(pubs, append([]byte(nil), payload...)) }
	c.OnPuback = func(pid uint16) { acks = append(acks, pid) }
	c.readLoop() // returns at EOF or on bad input, having failed the connection
	if c.Err() == nil {
		panic("the read loop returned without failing the connection")
	}
	return conn.out.Bytes(), pubs, acks
}

func TestReadLoopAcksQoS1Deliveries(t *testing.T) {
	var in []byte
	// PUBLISH QoS 1, topic "a/b", packet id 0x0102, payload "hi".
	in = append(in, pktPublish<<4|1<<1, 2+3+2+2, 0, 3, 'a', '/', 'b', 1, 2, 'h', 'i')
	// PUBLISH QoS 0, topic "c", payload "x".
	in = append(in, pktPublish<<4, 2+1+1, 0, 1, 'c', 'x')
	// PUBACK for packet id 7.
	in = append(in, pktPuback<<4, 2, 0, 7)
	written, pubs, acks := readAll(in)
	if want := []byte{pktPuback << 4, 2, 1, 2}; !bytes.Equal(written, want) {
		t.Errorf("wrote %v, want one PUBACK %v", written, want)
	}
	if len(pubs) != 2 || string(pubs[0]) != "hi" || string(pubs[1]) != "x" {
		t.Errorf("deliveries %q", pubs)
	}
	if len(acks) != 1 || acks[0] != 7 {
		t.Errorf("PUBACKs %v", acks)
	}
}

// FuzzReadLoop feeds arbitrary bytes to the client's packet parser, as a
// broker gone wrong would: it must fail the connection, never panic or hang.
func FuzzReadLoop(f *testing.F) {
	f.Add([]byte{pktPublish<<4 | 1<<1, 9, 0, 3, 'a', '/', 'b', 1, 2, 'h', 'i'})
	f.Add([]byte{pktPuback << 4, 2, 0, 7, pktPingresp << 4, 0})
	f.Add([]byte{pktSuback << 4, 3, 0, 1, 0})
	f.Add([]byte{pktPublish << 4, 0xff, 0xff, 0xff, 0x7f})       // 256 MiB claimed
	f.Add([]byte{pktPublish << 4, 0x80, 0x80, 0x80, 0x80, 0x01}) // malformed length
	f.Add([]byte{pktPublish<<4 | 1<<1, 3, 0, 1, 'a'})            // no packet id
	f.Add([]byte{pktConnack << 4, 2, 0, 0})                      // unexpected type
	f.Fuzz(func(t *testing.T, input []byte) {
		readAll(input)
	})
}

// TestCountedFenceIgnoresEarlyPingresps checks the QoS 0 fence: a PINGRESP
// counts only once its publisher has sent the fence PINGREQ (a keepalive's
// PINGRESP before that must not end the client's time).
func TestCountedFenceIgnoresEarlyPingresps(t *testing.T) {
	var f fence
	f.onPingresp()
	if f.at.Load() != 0 {
		t.Fatal("a PINGRESP before the fence was taken for it")
	}
	f.sent.Store(true)
	f.onPingresp()
	first := f.at.Load()
	if first == 0 {
		t.Fatal("the fence's PINGRESP was not recorded")
	}
	f.onPingresp()
	if f.at.Load() != first {
		t.Error("a later PINGRESP moved the fence")
	}
}

// TestEncodeMessage checks a PUBLISH of its own topic and payload: the
// retain flag, the QoS and packet id, and the payload as given, unpatched.
func TestEncodeMessage(t *testing.T) {
	for _, c := range []struct {
		name string
		m    outMsg
		want []byte
	}{
		{"QoS 1 retained", outMsg{kind: outMessage, qos: 1, retain: true, pid: 0x0102, topic: "a/b", payload: []byte("hi")},
			[]byte{pktPublish<<4 | 1<<1 | 1, 2 + 3 + 2 + 2, 0, 3, 'a', '/', 'b', 1, 2, 'h', 'i'}},
		{"QoS 0", outMsg{kind: outMessage, topic: "c", payload: []byte("x")},
			[]byte{pktPublish << 4, 2 + 1 + 1, 0, 1, 'c', 'x'}},
		{"empty retained (a delete)", outMsg{kind: outMessage, retain: true, topic: "c"},
			[]byte{pktPublish<<4 | 1, 2 + 1, 0, 1, 'c'}},
	} {
		conn := &scriptedConn{in: bytes.NewReader(nil)}
		cl := newClient(conn, Options{QueueLen: 1, KeepAlive: time.Minute})
		if err := cl.encode(c.m); err != nil {
			t.Fatal(err)
		}
		if err := cl.bw.Flush(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(conn.out.Bytes(), c.want) {
			t.Errorf("%s: wrote %v, want %v", c.name, conn.out.Bytes(), c.want)
		}
		if cl.Written() != 1 {
			t.Errorf("%s: Written %d, want 1", c.name, cl.Written())
		}
	}
}
