package freeport

import (
	"net"
	"strconv"
	"testing"
)

func listen(t *testing.T, port int) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("port %d: %v", port, err)
	}
	return ln
}

// A reserved port lies below the ephemeral range and can be bound.
func TestAReservedPortIsFreeAndBelowTheEphemeralRange(t *testing.T) {
	port, release, err := Reserve()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if port < lowest || port >= ephemeralStart() {
		t.Fatalf("port %d outside [%d, %d)", port, lowest, ephemeralStart())
	}
	listen(t, port).Close()
}

// A reserved port is not handed out again (in this process or another)
// until it is released.
func TestAReservedPortIsNotHandedOutTwice(t *testing.T) {
	port, release, err := Reserve()
	if err != nil {
		t.Fatal(err)
	}
	if p, r, err := reserveIn(port, port); err == nil {
		r()
		release()
		t.Fatalf("port %d handed out again while reserved", p)
	}
	release()
	p, r, err := reserveIn(port, port)
	if err != nil {
		t.Fatalf("port %d after its release: %v", port, err)
	}
	r()
	if p != port {
		t.Fatalf("got %d from the range %d-%d", p, port, port)
	}
}

// A port something else listens on is skipped, even unreserved.
func TestAPortInUseIsSkipped(t *testing.T) {
	port, release, err := Reserve()
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t, port)
	defer ln.Close()
	release()
	if p, r, err := reserveIn(port, port); err == nil {
		r()
		t.Fatalf("port %d handed out while a listener has it", p)
	}
}
