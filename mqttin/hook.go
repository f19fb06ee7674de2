package mqttin

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/maphash"
	"strconv"
	"sync"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/router"
)

// SourceMQTT is the Firehose-Source header of messages that MQTT clients
// published straight to a broker.
const SourceMQTT = "mqtt"

// Broker is what the hook needs of the embedded broker.
type Broker interface {
	// Release hands a publish the hook took from mochi (with
	// ErrRejectPacket) back to mochi, as the client cl that sent it, to be
	// retained, delivered and acked by mochi's own path, or with drop only
	// acked. Release calls the hook's OnPublish again, for the same packet.
	Release(cl *mqtt.Client, pk packets.Packet, drop bool) error
	// Released reports whether pk, seen in OnPublish, came back through
	// Release (and whether it is to be dropped), and removes its mark.
	Released(pk *packets.Packet) (released, drop bool)
	// Batch runs fn, which releases or answers several of cl's publishes,
	// so that what mochi writes meanwhile leaves in one write.
	Batch(cl *mqtt.Client, fn func())
	// Idle reports, from OnPublish, whether the publish being processed is
	// all cl has sent: no other waits to be read.
	Idle(cl *mqtt.Client) bool
}

// Hook routes what MQTT clients publish to the embedded broker, in the
// publish path, so that a PUBACK (a PUBREC at QoS 2) means the message is
// safe on every required route.
//
// A publish that is all its client has sent (it waits for each PUBACK, as
// most MQTT clients do) is routed at once, in OnPublish, and then goes on
// as mochi's own: nothing else of the client waits behind it. A client
// that sends more before it is answered gets a pipeline instead of mochi's
// read loop blocking one sink round trip per message: the hook takes the
// message from mochi (which then neither acks nor delivers it), the
// pipeline routes messages in batches, and then, in arrival order, gives
// each back to mochi as the client that sent it (Broker.Release), so that
// mochi retains it, delivers it and acks it exactly as it would have (see
// mqttin/README.md for why this is the one way to defer an ack with
// mochi's hooks). At most maxUnacked messages per client wait; beyond that
// the hook blocks the client's reads, which is the back-pressure.
//
// When a message cannot be made safe, the sender is told as its protocol
// allows: an MQTT 5 client gets PUBACK (or PUBREC) "quota exceeded" (0x97);
// an MQTT 3.1.1 client, which has no negative ack, is disconnected (its
// connection closed, without a DISCONNECT packet, which 3.1.1 does not
// define from a server) and resends when it reconnects. QoS 0 messages
// promise nothing and are delivered locally either way.
//
// The bridge's own inline client is skipped: the bridge's publisher has
// already routed its messages.
//
// Each routed message gets a de-duplication id (see session.msgID) that is
// the same when a client resends it within its MQTT session, and new for
// every new message, so that JetStream drops resends but never a message.
type Hook struct {
	mqtt.HookBase
	router   *router.Router
	broker   Broker
	rejected prometheus.Counter
	log      zerolog.Logger
	noRoutes bool // every publish passes as if there were no hook

	pipelines sync.Map // *mqtt.Client -> *pipeline
	sessions  sync.Map // client id -> *sessionEntry
}

// maxUnacked bounds one client's messages between arrival and PUBACK; it
// matches the receive maximum the broker advertises to MQTT 5 clients.
const maxUnacked = 1024

// NewHook returns the router's hook for the embedded broker b: it routes
// with r, counts in m the publishes it refuses, and logs to log (as the
// router's component, since what it logs is what routing refused).
func NewHook(r *router.Router, b Broker, m *Metrics, log zerolog.Logger) *Hook {
	return &Hook{
		router:   r,
		broker:   b,
		rejected: m.refused,
		log:      log.With().Str("component", "router").Logger(),
		noRoutes: len(r.Filters()) == 0,
	}
}

// ID names the hook in mochi's logs.
func (h *Hook) ID() string { return "firehose-router" }

// Provides says which mochi events the hook handles.
func (h *Hook) Provides(b byte) bool {
	switch b {
	case mqtt.OnPublish, mqtt.OnSessionEstablish, mqtt.OnDisconnect, mqtt.OnClientExpired:
		return true
	}
	return false
}

// OnSessionEstablish keeps the client's session, or starts a new one, as
// mochi is about to decide: it runs just before mochi's
// inheritClientSession, which gives a connection the session of the
// previous connection with its client id unless the new one asks for a
// clean session (clean start), or the previous one was an MQTT 3.1.1 clean
// session, or there is no previous session (it ended at a disconnect or
// expired; see OnDisconnect and OnClientExpired).
func (h *Hook) OnSessionEstablish(cl *mqtt.Client, pk packets.Packet) {
	e := &sessionEntry{owner: cl, ephemeral: cl.Properties.Clean && cl.Properties.ProtocolVersion < 5}
	if prev, ok := h.sessions.Load(cl.ID); ok && !pk.Connect.Clean && !prev.(*sessionEntry).ephemeral {
		e.s = prev.(*sessionEntry).s
	} else {
		e.s = newSession()
	}
	h.sessions.Store(cl.ID, e)
}

// OnPublish takes a message from an MQTT client that a route wants into the
// client's pipeline, and lets through the messages the pipeline gives back.
func (h *Hook) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if cl.Net.Inline || h.noRoutes || pk.Ignore {
		return pk, nil // Ignore: acked and dropped by mochi (a denied 3.1.1 publish), so never routed
	}
	if released, drop := h.broker.Released(&pk); released {
		if drop {
			return pk, packets.CodeSuccessIgnore // acked, and delivered nowhere
		}
		return pk, nil
	}
	msg := bus.Message{Topic: pk.TopicName, Payload: pk.Payload, QoS: pk.FixedHeader.Qos, Retain: pk.FixedHeader.Retain}
	// Once a client has messages in its pipeline, all its messages go
	// through it, so none overtakes another.
	p := h.pipelineOf(cl)
	busy := p != nil && p.busy()
	if !busy && !h.router.Matches(&msg) {
		return pk, nil
	}
	var s *session
	if p != nil {
		s = p.session
	} else {
		s = h.sessionFor(cl)
	}
	msg.Headers = map[string]string{
		bus.HeaderMsgID:      s.msgID(pk),
		bus.HeaderSource:     SourceMQTT,
		bus.HeaderReceivedAt: h.router.Now().UTC().Format(time.RFC3339Nano),
	}
	if !busy && h.broker.Idle(cl) {
		return h.routeNow(cl, pk, msg)
	}
	if p == nil {
		p = h.pipelineFor(cl)
	}
	// mochi resolved the topic alias already; the packet goes back without
	// one, or mochi would set it again when it is released.
	pk.Properties.TopicAliasFlag, pk.Properties.TopicAlias = false, 0
	p.push(item{pk: pk, msg: msg})
	return pk, packets.ErrRejectPacket // the pipeline releases it once routed
}

// OnDisconnect lets the client's pipeline finish what it holds and stop,
// and forgets the session when mochi ends it with the connection (an MQTT
// 3.1.1 clean session, an MQTT 5 session expiry interval of 0) and no new
// connection took it over.
func (h *Hook) OnDisconnect(cl *mqtt.Client, _ error, expire bool) {
	if p, ok := h.pipelines.LoadAndDelete(cl); ok {
		p.(*pipeline).close()
	}
	if expire && !cl.IsTakenOver() {
		h.forgetSession(cl)
	}
}

// OnClientExpired forgets a session mochi let expire.
func (h *Hook) OnClientExpired(cl *mqtt.Client) { h.forgetSession(cl) }

// forgetSession removes cl's session unless a later connection owns the
// client id by now.
func (h *Hook) forgetSession(cl *mqtt.Client) {
	if e, ok := h.sessions.Load(cl.ID); ok && e.(*sessionEntry).owner == cl {
		h.sessions.CompareAndDelete(cl.ID, e)
	}
}

// sessionFor is the session of cl's connection. A connection the hook did
// not see established (or whose client id a later connection has taken by
// now) gets a session of its own: at worst a resend becomes a duplicate,
// never a message lost.
func (h *Hook) sessionFor(cl *mqtt.Client) *session {
	if e, ok := h.sessions.Load(cl.ID); ok && e.(*sessionEntry).owner == cl {
		return e.(*sessionEntry).s
	}
	return newSession()
}

// routeNow routes a publish in OnPublish and lets mochi go on with it once
// it is safe. When it cannot be made safe, the answers are the pipeline's
// (see run); mochi writes an MQTT 5 PUBACK with the reason code itself,
// but would answer a QoS 2 publish with a PUBACK too, so a PUBREC is
// written here.
func (h *Hook) routeNow(cl *mqtt.Client, pk packets.Packet, msg bus.Message) (packets.Packet, error) {
	err := h.router.Route(context.Background(), msg)
	if code, ok := h.tooLarge(cl, pk, err); ok {
		// Too large for a required route: delivered nowhere (see tooLarge).
		if cl.Properties.ProtocolVersion == 5 && pk.FixedHeader.Qos == 2 {
			refuse(cl, pk, code)
			return pk, packets.ErrRejectPacket
		}
		return pk, code // mochi writes a QoS 1 MQTT 5 PUBACK with code; otherwise it acks and drops
	}
	if err == nil || pk.FixedHeader.Qos == 0 {
		if err != nil {
			h.refused(cl, pk, err)
		}
		return pk, nil
	}
	h.refused(cl, pk, err)
	switch {
	case cl.Properties.ProtocolVersion == 5 && pk.FixedHeader.Qos == 1:
		return pk, packets.ErrQuotaExceeded
	case cl.Properties.ProtocolVersion == 5:
		refuse(cl, pk, packets.ErrQuotaExceeded)
	default:
		cl.Stop(packets.ErrServerBusy) // closed, with no DISCONNECT: 3.1.1 has none from a server
	}
	return pk, packets.ErrRejectPacket
}

// tooLarge answers for a publish too large for a required route (a
// *router.TooLargeError from Fit or Route; ok is false for any other
// error): an MQTT 5 client gets "quota exceeded" (0x97, the PUBACK code
// that fits) with a reason string naming the route and its limit; an MQTT
// 3.1.1 client has no negative ack, and a disconnect would make it resend
// the message forever, so it is acked and the message dropped (code is
// CodeSuccessIgnore, as for QoS 0 of either version). Either way it is
// delivered nowhere, counted on the route as too_large, and logged.
func (h *Hook) tooLarge(cl *mqtt.Client, pk packets.Packet, err error) (code packets.Code, ok bool) {
	var tl *router.TooLargeError
	if err == nil || !errors.As(err, &tl) {
		return packets.Code{}, false
	}
	h.log.Warn().Err(err).Str("client", cl.ID).Str("topic", pk.TopicName).Int("protocol", int(cl.Properties.ProtocolVersion)).
		Msg("an MQTT publish is too large for a required route; it is delivered nowhere (MQTT 5: refused with 0x97; MQTT 3.1.1: acknowledged and dropped)")
	if cl.Properties.ProtocolVersion < 5 || pk.FixedHeader.Qos == 0 {
		return packets.CodeSuccessIgnore, true
	}
	return packets.Code{Code: packets.ErrQuotaExceeded.Code, Reason: tl.Reason()}, true
}

func (h *Hook) refused(cl *mqtt.Client, pk packets.Packet, err error) {
	h.rejected.Inc()
	h.log.Warn().Err(err).Str("client", cl.ID).Str("topic", pk.TopicName).
		Msg("an MQTT publish could not be made safe; refusing it so the client resends")
}

// pipelineOf is cl's pipeline, or nil if it has none.
func (h *Hook) pipelineOf(cl *mqtt.Client) *pipeline {
	if p, ok := h.pipelines.Load(cl); ok {
		return p.(*pipeline)
	}
	return nil
}

func (h *Hook) pipelineFor(cl *mqtt.Client) *pipeline {
	if p, ok := h.pipelines.Load(cl); ok {
		return p.(*pipeline)
	}
	p := newPipeline(h, cl)
	actual, loaded := h.pipelines.LoadOrStore(cl, p)
	if !loaded {
		go p.run()
	}
	return actual.(*pipeline)
}

type item struct {
	pk  packets.Packet
	msg bus.Message
	// tooLarge is Fit's refusal: the message is answered alone and routed nowhere.
	tooLarge error
}

// pipeline carries one client's messages from OnPublish to their release.
type pipeline struct {
	hook    *Hook
	cl      *mqtt.Client
	session *session
	slots   chan struct{} // one per message not yet released; full blocks the client's reads
	msgs    []bus.Message // the batch's messages, for Route; only run uses it

	mu     sync.Mutex
	cond   *sync.Cond
	items  []item
	closed bool
}

func newPipeline(h *Hook, cl *mqtt.Client) *pipeline {
	p := &pipeline{hook: h, cl: cl, session: h.sessionFor(cl), slots: make(chan struct{}, maxUnacked)}
	p.cond = sync.NewCond(&p.mu)
	return p
}

func (p *pipeline) busy() bool { return len(p.slots) > 0 }

func (p *pipeline) push(it item) {
	p.slots <- struct{}{}
	p.mu.Lock()
	p.items = append(p.items, it)
	p.mu.Unlock()
	p.cond.Signal()
}

func (p *pipeline) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cond.Signal()
}

// take waits for messages and returns up to router.MaxBatch of them; nil once
// the client is gone and nothing is left. spare is the previous batch, done
// with: its array takes the messages that arrive next, so that a busy
// client's items (each a whole packet) are neither reallocated nor copied
// again batch after batch.
func (p *pipeline) take(spare []item) []item {
	clear(spare) // drop the old packets' payloads before the array waits for new ones
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.items) == 0 && !p.closed {
		p.cond.Wait()
	}
	n := len(p.items)
	switch {
	case n == 0:
		return nil
	case n <= router.MaxBatch:
		batch := p.items
		p.items = spare[:0]
		return batch
	default:
		batch := append(spare[:0], p.items[:router.MaxBatch]...)
		p.items = append(p.items[:0], p.items[router.MaxBatch:]...)
		return batch
	}
}

// run routes batches and then, in arrival order, releases each message to
// mochi, or refuses it.
func (p *pipeline) run() {
	h := p.hook
	var batch []item
	for {
		batch = p.take(batch)
		if batch == nil {
			return
		}
		p.msgs = p.msgs[:0]
		for i := range batch {
			if batch[i].tooLarge = h.router.Fit(&batch[i].msg); batch[i].tooLarge == nil {
				p.msgs = append(p.msgs, batch[i].msg)
			}
		}
		err := h.router.Route(context.Background(), p.msgs...) // Route keeps no reference to p.msgs
		clear(p.msgs)
		if err != nil {
			h.refused(p.cl, batch[0].pk, err)
		}
		disconnect := false
		h.broker.Batch(p.cl, func() {
			for _, it := range batch {
				if it.tooLarge != nil {
					if code, _ := h.tooLarge(p.cl, it.pk, it.tooLarge); code == packets.CodeSuccessIgnore {
						h.release(p.cl, it.pk, true)
					} else {
						refuse(p.cl, it.pk, code)
					}
					continue
				}
				switch {
				case err == nil || it.pk.FixedHeader.Qos == 0:
					h.release(p.cl, it.pk, false)
				case p.cl.Properties.ProtocolVersion == 5:
					refuse(p.cl, it.pk, packets.ErrQuotaExceeded)
				default:
					disconnect = true
				}
			}
		})
		for range batch {
			<-p.slots
		}
		if disconnect {
			p.cl.Stop(packets.ErrServerBusy) // closed, with no DISCONNECT: 3.1.1 has none from a server
		}
	}
}

// release gives pk back to mochi (see Broker.Release).
func (h *Hook) release(cl *mqtt.Client, pk packets.Packet, drop bool) {
	if err := h.broker.Release(cl, pk, drop); err != nil {
		// The client has gone: it never got its ack, and resends the
		// message if its session lives on.
		h.log.Debug().Err(err).Str("client", cl.ID).Str("topic", pk.TopicName).Msg("releasing a routed publish failed")
	}
}

// refuse answers an MQTT 5 publish with a PUBACK (QoS 1) or PUBREC (QoS 2,
// which ends the exchange) carrying code, through mochi's writer.
func refuse(cl *mqtt.Client, pk packets.Packet, code packets.Code) {
	ack := packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Puback},
		PacketID:    pk.PacketID,
		ReasonCode:  code.Code,
		Properties:  packets.Properties{ReasonString: code.Reason},
	}
	if pk.FixedHeader.Qos == 2 {
		ack.FixedHeader.Type = packets.Pubrec
	}
	_ = cl.WritePacket(ack) // a failure means the client has gone; it resends
}

// sessionEntry is the hook's record of the MQTT session of one client id.
type sessionEntry struct {
	s     *session
	owner *mqtt.Client // the connection that established it last
	// ephemeral: an MQTT 3.1.1 clean session, which mochi never passes on
	// to a next connection.
	ephemeral bool
}

// session is what de-duplication ids need of one MQTT session; it lives as
// long as mochi keeps the session, across the client's reconnects.
type session struct {
	nonce [16]byte // random, so that no two sessions (nor two bridge runs) share ids
	// seed keys the hash of a message's identity. Ids only need to agree
	// within one session (a resend and its first sending), so a random seed
	// per session is enough, and maphash costs a fraction of a SHA-256.
	seed maphash.Seed

	mu      sync.Mutex
	lastPID uint16 // packet id of the last new (DUP=0) QoS 1 or 2 message
	cycle   uint64 // times the client's packet ids went down again: a new cycle of ids
	qos0    uint64 // QoS 0 messages so far
}

func newSession() *session {
	s := &session{seed: maphash.MakeSeed()}
	_, _ = rand.Read(s.nonce[:]) // crypto/rand.Read never fails
	return s
}

// msgID is the de-duplication id of a message of this session.
//
// A QoS 1 or 2 message is identified by the session, its packet id, the
// cycle of packet ids it belongs to, and its topic and payload. A client
// sends a new message with DUP=0, and only reuses a packet id once its
// previous message is acknowledged, and resends a message with DUP=1 and
// the same packet id, in the same session, after a reconnect: so a resend
// gets the id of its first sending, and JetStream stores it once. A client
// that counts its packet ids up and wraps around (as most do) starts a new
// cycle when an id is not above the last one, so even identical messages
// that reuse a packet id an hour later get new ids. Whatever order a client
// picks ids in, the new messages of one cycle have rising packet ids, so no
// two new messages share an id. A resend whose packet id is above the last
// new one is taken to belong to the cycle before; when that guess is wrong
// the resend is stored twice, which at-least-once allows.
//
// A QoS 0 message is never resent, so each gets an id of its own.
func (s *session) msgID(pk packets.Packet) string {
	s.mu.Lock()
	var counter uint64 // the QoS 0 message's number, or the QoS 1/2 message's cycle
	switch {
	case pk.FixedHeader.Qos == 0:
		s.qos0++
		counter = s.qos0
	case !pk.FixedHeader.Dup:
		if pk.PacketID <= s.lastPID {
			s.cycle++
		}
		s.lastPID = pk.PacketID
		counter = s.cycle
	default:
		counter = s.cycle
		if pk.PacketID > s.lastPID && counter > 0 {
			counter--
		}
	}
	s.mu.Unlock()
	// The session's nonce and its counters go in plain, so that no two new
	// messages of a session share an id whatever a hash does (a 64-bit hash
	// alone would, at 10k msgs/s, collide about once a year within
	// JetStream's 2-hour duplicate window): "mqtt-<nonce>-<n>" for QoS 0,
	// "mqtt-<nonce>-<cycle>.<packet id>-<content hash>" for QoS 1 and 2. The
	// content's hash keeps a resend whose cycle was guessed wrong from taking
	// another message's id.
	id := make([]byte, 0, 5+32+1+13+1+4+1+16)
	id = append(id, "mqtt-"...)
	id = hex.AppendEncode(id, s.nonce[:])
	id = append(id, '-')
	id = strconv.AppendUint(id, counter, 36)
	if pk.FixedHeader.Qos == 0 {
		return string(id)
	}
	id = append(id, '.')
	id = strconv.AppendUint(id, uint64(pk.PacketID), 36)
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteString(pk.TopicName)
	h.WriteByte(0)
	h.Write(pk.Payload)
	id = append(id, '-')
	id = hex.AppendEncode(id, binary.BigEndian.AppendUint64(nil, h.Sum64()))
	return string(id)
}
