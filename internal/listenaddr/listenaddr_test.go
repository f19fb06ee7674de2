package listenaddr

import (
	"net"
	"testing"
)

// TestCheckAgreesWithListen: what Check accepts, net.Listen takes, and the
// other way round (hosts apart, which Check does not resolve).
func TestCheckAgreesWithListen(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", ":0", "127.0.0.1:", "[::1]:0", "127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1:no-such-service", "nonsense", "127.0.0.1"} {
		checked := Check(addr, "127.0.0.1:8080") == nil
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			ln.Close()
		}
		if checked != (err == nil) {
			t.Errorf("%q: Check says %v, net.Listen says %v", addr, checked, err)
		}
	}
}
