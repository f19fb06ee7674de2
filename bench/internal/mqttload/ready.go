package mqttload

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
)

// WaitReady polls until a TCP connect and an authenticated MQTT CONNECT to
// addr succeed, proc (nil for a broker the benchmark did not start) exits,
// a refusal of the credentials, or the timeout.
func WaitReady(ctx context.Context, addr, user, pass string, proc *benchkit.Proc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var lastErr error
	for attempt := 0; ; attempt++ {
		if err := proc.Alive(); err != nil {
			return err
		}
		c, err := Dial(Options{
			Addr: addr, ClientID: fmt.Sprintf("bench-ready-%d", attempt),
			Username: user, Password: pass, Timeout: 2 * time.Second,
		})
		if err == nil {
			_, _ = c.conn.Write([]byte{pktDisconnect << 4, 0})
			c.conn.Close()
			return nil
		}
		lastErr = err
		var refused *RefusedError
		if errors.As(err, &refused) && refused.AuthFailure() {
			// The broker is up and answered; polling will not change that.
			return fmt.Errorf("broker at %s: %w (check -user/-pass)", addr, err)
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("broker at %s not ready after %v: %v", addr, timeout, lastErr)
			if proc != nil {
				msg += "\nlog tail:\n" + proc.LogTail()
			}
			return errors.New(msg)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond): // poll interval
		}
	}
}
