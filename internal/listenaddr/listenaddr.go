// Package listenaddr checks a listener's host:port the way net.Listen will
// read it, so that `check` refuses what `run` would (a port over 65535, a
// service name the machine does not know) and a config problem names its
// key before anything starts. It does not resolve host names: that depends
// on the machine and the moment.
package listenaddr

import (
	"fmt"
	"net"
)

// Check reports why addr cannot be listened on, or nil. example is a good
// address for the message, such as "127.0.0.1:8080".
func Check(addr, example string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port (for example %s)", addr, example)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("%q: the port must be a number from 0 to 65535 (0: any free port), or a service name (for example %s)", addr, example)
	}
	return nil
}
