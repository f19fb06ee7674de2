package broker

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/internal/credentials"
	"github.com/opsfirehose/firehose/internal/ellipsis"
	"github.com/opsfirehose/firehose/topics"
)

// accessPolicy decides who may connect, publish and subscribe. It is fixed
// when the broker is made: changing users takes a restart.
type accessPolicy struct {
	allowAnonymous bool
	users          map[string]*account
	// passwords checks passwords with bcrypt, and remembers the last that
	// passed per user, so a reconnect storm does not cost a bcrypt each,
	// and a user whose password is known gets in while guessers are
	// throttled.
	passwords *credentials.Verifier
}

type account struct {
	username  string
	publish   []string
	subscribe []string // nil: everything
}

func newAccessPolicy(allowAnonymous bool, users []credentials.User) *accessPolicy {
	p := &accessPolicy{allowAnonymous: allowAnonymous, users: make(map[string]*account, len(users))}
	hashes := make(map[string]string, len(users))
	for _, u := range users {
		hashes[u.Username] = u.PasswordHash
		p.users[u.Username] = &account{
			username:  u.Username,
			publish:   u.Publish,
			subscribe: u.Subscribe,
		}
	}
	p.passwords = credentials.NewVerifier(hashes)
	return p
}

// mayPublish reports whether the account may publish to the topic name. A
// missing account means an anonymous client, which may never publish. No
// client may publish to $SYS topics (mochi's own rule), nor to any other
// $-topic unless its ACL names it: wildcards do not match them.
func (a *account) mayPublish(topic string) bool {
	if a == nil || !mqtt.IsValidFilter(topic, true) || topic == "" {
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

// authHook is our one mochi hook for the trust boundary: who may connect
// (anonymous clients when allowed, users by bcrypt, with throttling), which
// client ids they may use, and what they may publish, wills included.
// Anonymous clients may subscribe to anything and publish nothing. The
// bridge's inline client bypasses it (mochi skips ACL checks for inline
// clients).
//
// Every publish decision is made here, once, with the same answers:
//   - allowed: mochi goes on (the router's hook, retain, delivery, ack);
//   - denied, MQTT 5: PUBACK or PUBREC "not authorized" (0x87), and for
//     QoS 0, which has no ack, DISCONNECT 0x87;
//   - denied, MQTT 3.1.1, which has no negative ack: a positive ack, and
//     the message is dropped, as mosquitto does.
//
// Each denial is counted (firehose_broker_publish_denied_total) and logged:
// the first of a client and topic at once, those that follow as one count
// per interval.
type authHook struct {
	mqtt.HookBase
	log     zerolog.Logger
	metrics *metrics
	server  *mqtt.Server

	policy        *accessPolicy
	throttle      *loginThrottle
	timeout       time.Duration // how long a login may wait for a password check
	maxTopicAlias uint16

	// approved holds the clients OnConnect let in, for OnConnectAuthenticate.
	approved sync.Map

	denials  denialLog
	loginLog rateLimitedLog
}

func newAuthHook(log zerolog.Logger, m *metrics, policy *accessPolicy, cfg Config) *authHook {
	return &authHook{
		log: log, metrics: m, policy: policy,
		throttle: newLoginThrottle(cfg.Login, nil), timeout: cfg.ConnectTimeout,
		maxTopicAlias: uint16(cfg.MaxTopicAlias),
		denials:       denialLog{log: log},
		loginLog:      rateLimitedLog{log: log, what: "refused connections"},
	}
}

// ID names the hook in mochi's logs.
func (h *authHook) ID() string { return "firehose-auth" }

// Provides lists the events the hook handles. mochi asks it for every
// event of every packet, so it is a switch.
func (h *authHook) Provides(b byte) bool {
	switch b {
	case mqtt.OnConnect, mqtt.OnConnectAuthenticate, mqtt.OnACLCheck, mqtt.OnPacketRead:
		return true
	}
	return false
}

// OnConnect admits or refuses a connection, answering with its own
// CONNACK: mochi's answer to a failed OnConnectAuthenticate is always "bad
// username or password", which is wrong for a throttled login, a will the
// client may not publish or a client id that belongs to someone else.
// Returning an error ends the connection without another CONNACK.
func (h *authHook) OnConnect(cl *mqtt.Client, pk packets.Packet) error {
	if gc, ok := cl.Net.Conn.(*gatedConn); ok {
		gc.SetClient(cl)
	}
	if cl.ID == mqtt.InlineClientId {
		// A network client with it would take over the bridge's own publisher.
		return h.refuse(cl, "", refusedReservedClientID, packets.ErrClientIdentifierNotValid, "the client id \"inline\" is reserved")
	}
	acct, err := h.authenticate(cl, pk)
	if err != nil {
		return err
	}
	username := string(pk.Connect.Username)
	if pk.Connect.WillFlag && !acct.mayPublish(pk.Connect.WillTopic) {
		h.metrics.publishDenied.Inc()
		return h.refuse(cl, username, refusedWillNotAllowed, packets.ErrNotAuthorized,
			"its will is a publish to "+pk.Connect.WillTopic+", which the client may not publish")
	}
	if existing, ok := h.server.Clients.Get(cl.ID); ok && string(existing.Properties.Username) != username {
		// [MQTT-3.1.4-3] lets a new connection take over its own session; a
		// session of another identity is not its own. An offline anonymous
		// session protects nothing and may be taken over.
		if !existing.Closed() || len(existing.Properties.Username) > 0 {
			return h.refuse(cl, username, refusedClientIDTaken, packets.ErrClientIdentifierNotValid,
				"the client id is in use by another identity")
		}
	}
	h.approved.Store(cl, struct{}{})
	return nil
}

// OnConnectAuthenticate lets in the clients OnConnect approved.
func (h *authHook) OnConnectAuthenticate(cl *mqtt.Client, _ packets.Packet) bool {
	_, ok := h.approved.LoadAndDelete(cl)
	return ok
}

// authenticate checks the client's credentials: its account, nil for an
// anonymous client, or the error that refused it (already answered).
func (h *authHook) authenticate(cl *mqtt.Client, pk packets.Packet) (*account, error) {
	username := string(pk.Connect.Username)
	acct, refusal := h.login(cl.Net.Remote, username, pk.Connect.Password)
	if refusal != nil {
		return nil, h.refuse(cl, username, refusal.reason, refusal.code, refusal.why)
	}
	return acct, nil
}

// loginRefusal is why login refused credentials.
type loginRefusal struct {
	reason string       // the refusal's kind, for metrics and logs
	code   packets.Code // the CONNACK's
	why    string       // for the log and the client
}

// login checks a username and password from remote as every login is
// checked, MQTT's and the history API's: none means an anonymous client
// (account nil), when allowed; a user's password is checked with bcrypt,
// one check at a time, and failures are throttled per address and per
// username.
func (h *authHook) login(remote, username string, password []byte) (*account, *loginRefusal) {
	p := h.policy
	if username == "" && len(password) == 0 {
		if !p.allowAnonymous {
			return nil, &loginRefusal{refusedBadCredentials, packets.ErrBadUsernameOrPassword, "anonymous clients are not allowed"}
		}
		return nil, nil
	}
	acct := p.users[username]
	if acct != nil && h.policy.passwords.Known(username, password) {
		return acct, nil // a password that passed before: no bcrypt, and no throttle
	}
	keys := loginKeys(remote, username)
	if blocked, until := h.throttle.blocked(keys[:]...); blocked {
		return nil, &loginRefusal{refusedThrottled, packets.ErrConnectionRateExceeded, throttledWhy(until)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
	defer cancel()
	ok, ran := h.throttle.check(ctx, func() bool {
		// For an unknown user this spends the time of a real check, so
		// that timing does not reveal which users exist.
		return h.policy.passwords.Compare(username, password)
	})
	if !ran {
		return nil, &loginRefusal{refusedBusy, packets.ErrServerBusy, "too many logins at once; no password check was free in time"}
	}
	if !ok {
		why := "wrong password"
		if acct == nil {
			why = "unknown user"
		}
		if h.throttle.failed(keys[:]...) {
			why += "; backing off further logins from this address or for this username"
		}
		return nil, &loginRefusal{refusedBadCredentials, packets.ErrBadUsernameOrPassword, why}
	}
	h.throttle.succeeded(keys[:]...) // Compare remembered the password
	return acct, nil
}

// loginKeys are the throttle's keys for a login: its source address and its username.
func loginKeys(remote, username string) [2]string {
	return [2]string{"addr " + host(remote), "user " + username}
}

func throttledWhy(until time.Time) string {
	return "too many failed logins from this address or for this username; retry after " + until.UTC().Format(time.RFC3339)
}

// screen is the gate's early look at a CONNECT, before mochi makes a
// client for it: a login from a source or for a username that is backing
// off is refused there, for the price of a CONNACK, so that a guessing
// storm costs little more than its connections. It returns the CONNACK to
// send, or nil to let the connection through.
func (h *authHook) screen(remote string, version byte, connect []byte) []byte {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect}, ProtocolVersion: version}
	if pk.ConnectDecode(connect) != nil || len(pk.Connect.Username) == 0 {
		return nil // mochi answers what is malformed; anonymous clients are not throttled
	}
	username := string(pk.Connect.Username)
	if h.policy.passwords.Known(username, pk.Connect.Password) {
		return nil
	}
	keys := loginKeys(remote, username)
	blocked, until := h.throttle.blocked(keys[:]...)
	if !blocked {
		return nil
	}
	h.refused(pk.Connect.ClientIdentifier, username, remote, "", refusedThrottled, throttledWhy(until))
	ack := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connack}, ProtocolVersion: pk.ProtocolVersion,
		ReasonCode: connackCode(pk.ProtocolVersion, packets.ErrConnectionRateExceeded).Code}
	var buf bytes.Buffer
	if ack.ConnackEncode(&buf) != nil {
		return nil
	}
	return buf.Bytes()
}

// refuse answers a CONNECT with a CONNACK carrying code (mapped to MQTT
// 3.1.1's return codes for older clients), counts and logs the refusal
// (aggregated), and returns the error that makes mochi close the connection.
func (h *authHook) refuse(cl *mqtt.Client, username, reason string, code packets.Code, why string) error {
	h.refused(cl.ID, username, cl.Net.Remote, cl.Net.Listener, reason, why)
	_ = h.server.SendConnack(cl, connackCode(cl.Properties.ProtocolVersion, code), false, nil)
	return code
}

// refused counts a refused connection and logs it, at most one warning per
// interval with the count of those left out.
func (h *authHook) refused(client, username, remote, listener, reason, why string) {
	h.metrics.refuse(reason)
	if reason == refusedBadCredentials {
		h.metrics.authFailures.Inc()
	}
	h.loginLog.do(func() {
		ev := h.log.Warn().Str("client", ellipsis.Cut(client, maxLoggedField)).Str("username", ellipsis.Cut(username, maxLoggedField)).
			Str("remote", remote).Str("reason", reason)
		if listener != "" {
			ev = ev.Str("listener", listener)
		}
		ev.Msg("refused connection: " + why)
	})
}

// connackCode is code as a CONNACK of the client's protocol version carries
// it. MQTT 3.1.1 has six return codes; mochi maps only some of MQTT 5's.
func connackCode(version byte, code packets.Code) packets.Code {
	if version == 5 {
		return code
	}
	switch code {
	case packets.ErrClientIdentifierNotValid:
		return packets.Err3ClientIdentifierNotValid
	case packets.ErrServerBusy, packets.ErrConnectionRateExceeded:
		return packets.Err3ServerUnavailable
	default:
		return packets.Err3NotAuthorized
	}
}

// host is the address part of a remote "host:port".
func host(remote string) string {
	if h, _, err := net.SplitHostPort(remote); err == nil {
		return h
	}
	return remote
}

// OnPacketRead resolves a topic alias before the publish ACL is checked
// (mochi checks the ACL first, on an alias-only publish's empty topic),
// answers the publishes that mochi would drop without a word ($SYS topics,
// and QoS 0 publishes an MQTT 5 client may not make), and decides an MQTT
// 3.1.1 client's publishes: a denied one is marked Ignore, which mochi acks
// and then neither retains, delivers nor hands to a route (mqttin), as for
// a hook's CodeSuccessIgnore. Deciding here rather than in an OnPublish
// hook costs a 3.1.1 publish one ACL check instead of three, and mochi
// one hook call fewer per publish (a copy of the packet each way).
func (h *authHook) OnPacketRead(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if gc, ok := cl.Net.Conn.(*gatedConn); ok {
		gc.taken++ // see gatedConn.inputPending
	}
	if pk.FixedHeader.Type != packets.Publish {
		return pk, nil
	}
	v5 := cl.Properties.ProtocolVersion == 5
	if pk.TopicName == "" && pk.Properties.TopicAlias > 0 && pk.Properties.TopicAlias <= h.maxTopicAlias {
		// Set with an empty name returns the alias's topic, if it has one.
		if pk.TopicName = cl.State.TopicAliases.Inbound.Set(pk.Properties.TopicAlias, ""); pk.TopicName == "" {
			// An alias that was never set: a protocol error [MQTT-3.3.2-8].
			_ = h.server.DisconnectClient(cl, packets.ErrTopicAliasInvalid)
			return pk, packets.ErrRejectPacket
		}
	}
	if h.policy.users[string(cl.Properties.Username)].mayPublish(pk.TopicName) {
		return pk, nil // (a topic with a wildcard never may)
	}
	if strings.IndexByte(pk.TopicName, '+') >= 0 || strings.IndexByte(pk.TopicName, '#') >= 0 {
		return pk, nil // malformed, not denied: mochi ends the connection
	}
	switch {
	case pk.FixedHeader.Qos == 0 && v5:
		h.denied(cl, pk.TopicName)
		_ = h.server.DisconnectClient(cl, packets.ErrNotAuthorized)
		return pk, packets.ErrRejectPacket
	case !mqtt.IsValidFilter(pk.TopicName, true):
		// A $SYS topic, which mochi drops without an ack: answer as for any denial.
		h.denied(cl, pk.TopicName)
		h.answerDenied(cl, pk)
	case !v5:
		// No negative ack in 3.1.1: mochi acks it (OnACLCheck lets it
		// through) and drops it.
		h.denied(cl, pk.TopicName)
		pk.Ignore = true
	}
	return pk, nil // mochi asks OnACLCheck (MQTT 5), or drops what is answered here
}

// answerDenied acks a denied publish that mochi will drop silently: "not
// authorized" for MQTT 5, a positive ack for 3.1.1.
func (h *authHook) answerDenied(cl *mqtt.Client, pk packets.Packet) {
	if pk.FixedHeader.Qos == 0 {
		return
	}
	ack := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: pk.PacketID}
	if pk.FixedHeader.Qos == 2 {
		ack.FixedHeader.Type = packets.Pubrec
	}
	if cl.Properties.ProtocolVersion == 5 {
		ack.ReasonCode = packets.ErrNotAuthorized.Code
		ack.Properties.ReasonString = packets.ErrNotAuthorized.Reason
	}
	_ = cl.WritePacket(ack)
}

// OnACLCheck is asked before a client publishes (write) and both when it
// subscribes and before each delivery to it (read). A denied MQTT 5
// publish is refused here, and mochi answers it with its reason code. An
// MQTT 3.1.1 publish is always let through: OnPacketRead decided it, and
// marked a denied one Ignore, which mochi acks and drops (for a false
// here, mochi would disconnect the client instead). The same holds for
// the 3.1.1 publishes the router hands back to mochi (Release), which
// OnPacketRead let through, and for wills, checked at CONNECT.
func (h *authHook) OnACLCheck(cl *mqtt.Client, topic string, write bool) bool {
	if write && cl.Properties.ProtocolVersion != 5 {
		return true
	}
	acct := h.policy.users[string(cl.Properties.Username)]
	if !write {
		return acct.maySubscribe(topic)
	}
	if acct.mayPublish(topic) {
		return true
	}
	h.denied(cl, topic)
	return false
}

// denied counts and logs a denied publish: every one, those of a client
// and topic that go on aggregated (denialLog).
func (h *authHook) denied(cl *mqtt.Client, topic string) {
	h.metrics.publishDenied.Inc()
	username := string(cl.Properties.Username)
	why := "topic outside the user's publish ACL"
	switch {
	case username == "":
		why = "anonymous clients are read-only"
	case !mqtt.IsValidFilter(topic, true):
		why = "$SYS topics are the broker's"
	}
	h.denials.denied(cl.ID, username, cl.Net.Remote, topic, why)
}
