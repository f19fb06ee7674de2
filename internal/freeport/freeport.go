// Package freeport reserves loopback TCP ports for programs that must be
// told their port before they start (a binary under test, mosquitto,
// postgres, a nats-server restarted on the same port), for tests and test
// harnesses that run many such programs at once.
//
// Asking the kernel for a free port (listening on :0 and closing) races: the
// port is free only until someone else takes it, and on a busy machine
// running several test binaries at once, someone does. The kernel hands out
// ports of its ephemeral range to every outgoing connection and every
// listener on :0, so a port picked that way can become a connection's source
// port, or another test's listener, before the program binds it. A port
// from Reserve lies below that range, where the kernel never picks one on
// its own, and is locked (flock on a file in the temporary directory) until
// it is released, so no other process using Reserve hands it out too.
//
// A test that can listen on :0 itself, and pass the listener or read the
// bound address, needs none of this.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lowest is the bottom of the range Reserve picks from: above the fixed
// ports the project's programs use by default (1883, 8080, 8083) and the
// well-known services.
const lowest = 10000

// Reserve returns a loopback port that is free and stays reserved until
// release is called (the process exiting releases it too). It is an error
// when every port of the range is taken.
func Reserve() (port int, release func(), err error) {
	hi := ephemeralStart() - 1
	if hi <= lowest {
		return 0, nil, fmt.Errorf("freeport: no ports below the ephemeral range (it starts at %d)", hi+1)
	}
	return reserveIn(lowest, hi)
}

// reserveIn is Reserve from the ports lo to hi.
func reserveIn(lo, hi int) (port int, release func(), err error) {
	dir := filepath.Join(os.TempDir(), "firehose-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, nil, fmt.Errorf("freeport: %w", err)
	}
	n := hi - lo + 1
	start := rand.IntN(n)
	for i := range n {
		port := lo + (start+i)%n
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return 0, nil, fmt.Errorf("freeport: %w", err)
		}
		// flock belongs to the open file, so a second Reserve in this
		// process is refused as one in another process is.
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil { // taken by something that does not use Reserve
			f.Close()
			continue
		}
		ln.Close()
		return port, func() { f.Close() }, nil
	}
	return 0, nil, fmt.Errorf("freeport: every port from %d to %d is taken", lo, hi)
}

// ephemeralStart is the first port of the kernel's ephemeral range (Linux's
// default when it cannot be read).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return lo
}
