package broker

import (
	"errors"
	"fmt"
)

// ErrRefused is Reader's refusal of credentials.
var ErrRefused = errors.New("credentials refused")

// Reader checks a username and password from remote (an address, for the
// throttle) as the MQTT listeners check a CONNECT's, with the same bcrypt
// cache and the same throttle of failed logins, and returns what they may
// read: mayRead reports, for a topic filter or a topic name, whether an
// MQTT subscriber logged in with them may read it. No username and no
// password mean an anonymous client. A refusal wraps ErrRefused and says
// why. It is how the bridge's HTTP readers of the bus (the history API)
// follow the read policy of MQTT subscribers.
func (b *Broker) Reader(remote, username string, password []byte) (mayRead func(string) bool, err error) {
	acct, refusal := b.auth.login(remote, username, password)
	if refusal != nil {
		b.auth.refused("http", username, remote, "http", refusal.reason, refusal.why)
		return nil, fmt.Errorf("%w: %s", ErrRefused, refusal.why)
	}
	return acct.maySubscribe, nil
}
