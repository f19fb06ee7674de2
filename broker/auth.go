package broker

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"sync"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"

	"github.com/opsfirehose/firehose/topics"
)

// accessPolicy decides who may connect, publish and subscribe. It is fixed
// when the broker is made: changing users takes a restart.
type accessPolicy struct {
	allowAnonymous bool
	users          map[string]*account
}

type account struct {
	username  string
	hash      []byte
	publish   []string
	subscribe []string // nil: everything
}

func newAccessPolicy(allowAnonymous bool, users []User) *accessPolicy {
	p := &accessPolicy{allowAnonymous: allowAnonymous, users: make(map[string]*account, len(users))}
	for _, u := range users {
		p.users[u.Username] = &account{
			username:  u.Username,
			hash:      []byte(u.PasswordHash),
			publish:   u.Publish,
			subscribe: u.Subscribe,
		}
	}
	return p
}

// mayPublish reports whether the client may publish to the topic name. A
// missing account means an anonymous client, which may never publish.
func (a *account) mayPublish(topic string) bool {
	if a == nil {
		return false
	}
	for _, f := range a.publish {
		if topics.Match(f, topic) {
			return true
		}
	}
	return false
}

// maySubscribe reports whether the client may subscribe to a filter or receive
// a topic name (mochi asks both through one callback). Overlap serves both: a
// filter is allowed if it can match something the account may read, and each
// delivery is then checked against the topic name.
func (a *account) maySubscribe(filter string) bool {
	if a == nil || a.subscribe == nil {
		return true
	}
	if group, inner, ok := topics.SplitShared(filter); ok && group != "" {
		filter = inner
	}
	for _, f := range a.subscribe {
		if topics.Overlap(f, filter) {
			return true
		}
	}
	return false
}

// authHook is our one mochi hook for access control: anonymous clients may
// subscribe to anything and publish nothing; configured users authenticate with
// bcrypt and get ACLs of topic filters. The bridge's inline client bypasses it
// (mochi skips ACL checks for inline clients).
type authHook struct {
	mqtt.HookBase
	log     zerolog.Logger
	metrics *metrics
	server  *mqtt.Server

	policy *accessPolicy

	// verified caches a digest of the last password that passed bcrypt per
	// user, so a reconnect storm does not cost a bcrypt each. It is keyed by
	// the account pointer.
	verifiedMu sync.Mutex
	verified   map[*account][32]byte
	salt       [16]byte

	denyLog rateLimitedLog
}

func newAuthHook(log zerolog.Logger, m *metrics, policy *accessPolicy) *authHook {
	h := &authHook{log: log, metrics: m, verified: map[*account][32]byte{}}
	_, _ = rand.Read(h.salt[:])
	h.policy = policy
	return h
}

// ID names the hook in mochi's logs.
func (h *authHook) ID() string { return "firehose-auth" }

// Provides lists the events the hook handles.
func (h *authHook) Provides(b byte) bool {
	return bytes.IndexByte([]byte{mqtt.OnConnect, mqtt.OnConnectAuthenticate, mqtt.OnACLCheck, mqtt.OnPacketRead}, b) >= 0
}

// OnConnect refuses the client id that mochi reserves for the inline client:
// a network client using it would take over the bridge's own publisher.
func (h *authHook) OnConnect(cl *mqtt.Client, pk packets.Packet) error {
	if cl.ID == mqtt.InlineClientId {
		h.log.Warn().Str("remote", cl.Net.Remote).Msg("refused a client using the reserved client id \"inline\"")
		_ = h.server.SendConnack(cl, packets.ErrClientIdentifierNotValid, false, nil)
		return packets.ErrClientIdentifierNotValid
	}
	return nil
}

// OnConnectAuthenticate admits anonymous clients (when allowed) and users whose
// password matches their bcrypt hash.
func (h *authHook) OnConnectAuthenticate(cl *mqtt.Client, pk packets.Packet) bool {
	p := h.policy
	username := string(pk.Connect.Username)
	if username == "" && len(pk.Connect.Password) == 0 {
		if !p.allowAnonymous {
			h.refuse(cl, "", "anonymous clients are not allowed")
		}
		return p.allowAnonymous
	}
	acct := p.users[username]
	if acct == nil {
		// Spend the same time as a real check, so timing does not reveal which users exist.
		_ = bcrypt.CompareHashAndPassword(dummyHash, pk.Connect.Password)
		h.refuse(cl, username, "unknown user")
		return false
	}
	if h.checkPassword(acct, pk.Connect.Password) {
		return true
	}
	h.refuse(cl, username, "wrong password")
	return false
}

func (h *authHook) refuse(cl *mqtt.Client, username, why string) {
	h.metrics.authFailures.Inc()
	h.log.Warn().Str("client", cl.ID).Str("username", username).Str("remote", cl.Net.Remote).
		Str("listener", cl.Net.Listener).Msg("refused connection: " + why)
}

func (h *authHook) checkPassword(acct *account, password []byte) bool {
	digest := sha256.Sum256(append(h.salt[:], password...))
	h.verifiedMu.Lock()
	known, ok := h.verified[acct]
	h.verifiedMu.Unlock()
	if ok && subtle.ConstantTimeCompare(known[:], digest[:]) == 1 {
		return true
	}
	if bcrypt.CompareHashAndPassword(acct.hash, password) != nil {
		return false
	}
	h.verifiedMu.Lock()
	h.verified[acct] = digest
	h.verifiedMu.Unlock()
	return true
}

// OnACLCheck is asked before a client publishes (write) and both when it
// subscribes and before each delivery to it (read).
func (h *authHook) OnACLCheck(cl *mqtt.Client, topic string, write bool) bool {
	acct := h.policy.users[string(cl.Properties.Username)]
	if write {
		if acct.mayPublish(topic) {
			return true
		}
		h.denied(cl, topic)
		return false
	}
	return acct.maySubscribe(topic)
}

// OnPacketRead refuses a QoS 0 publish outside the client's ACL by closing the
// connection (with reason "not authorized" for MQTT 5). mochi would drop it
// silently, and an operator's `mosquitto_pub` would then look as if it worked.
// QoS 1 and 2 are refused by mochi itself: a PUBACK with a reason code for
// MQTT 5, a disconnect for 3.1.1.
func (h *authHook) OnPacketRead(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if pk.FixedHeader.Type != packets.Publish || pk.FixedHeader.Qos != 0 || pk.TopicName == "" {
		return pk, nil
	}
	acct := h.policy.users[string(cl.Properties.Username)]
	if acct.mayPublish(pk.TopicName) {
		return pk, nil
	}
	h.denied(cl, pk.TopicName)
	if cl.Properties.ProtocolVersion == 5 {
		_ = h.server.DisconnectClient(cl, packets.ErrNotAuthorized)
	}
	return pk, packets.ErrRejectPacket
}

func (h *authHook) denied(cl *mqtt.Client, topic string) {
	h.metrics.publishDenied.Inc()
	username := string(cl.Properties.Username)
	h.denyLog.do(func(suppressed int) {
		ev := h.log.Warn().Str("client", cl.ID).Str("username", username).Str("topic", topic)
		if suppressed > 0 {
			ev = ev.Int("similar_suppressed", suppressed)
		}
		if username == "" {
			ev.Msg("refused publish: anonymous clients are read-only")
		} else {
			ev.Msg("refused publish: topic outside the user's publish ACL")
		}
	})
}

// dummyHash is a bcrypt hash (cost 10, the default) of a password nobody
// knows, used to make a check for an unknown user cost as much as one for a
// known user.
var dummyHash = []byte("$2a$10$57brKkbEvBvIkR7ea38DT.BjrnQGqtoAoyBDOlqAoGP5Su.3XWT36")
