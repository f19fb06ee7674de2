package router

import (
	"bytes"
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

	"github.com/opsfirehose/firehose/bus"
)

// SourceMQTT is the Firehose-Source header of messages that MQTT clients
// published straight to a broker.
const SourceMQTT = "mqtt"

// Broker is what the hook needs of the embedded broker.
type Broker interface {
	// Deliver publishes a packet to local subscribers (and the retained
	// store) as the bridge's inline client, which the hook skips.
	Deliver(pk packets.Packet) error
	// Disconnect ends a client's connection, with a reason code for MQTT 5.
	Disconnect(cl *mqtt.Client, code packets.Code) error
}

// Hook routes what MQTT clients publish to the embedded broker, in the
// publish path, so that a QoS 1 PUBACK means the message is safe on every
// required route.
//
// A client's QoS 0 and 1 messages that need routing go through a per-client
// pipeline instead of blocking mochi's read loop one sink round trip per
// message: the hook takes the message from mochi (which then neither acks
// nor delivers it), the pipeline routes messages in batches, and then, in
// arrival order, delivers each to local subscribers and sends its PUBACK.
// At most maxUnacked messages per client wait; beyond that the hook blocks
// the client's reads, which is the back-pressure. QoS 2 keeps mochi's own
// handshake and is routed synchronously.
//
// The bridge's own inline client is skipped: the bridge's publisher has
// already routed its messages.
//
// Each routed message gets a de-duplication id (see session.msgID) that is
// the same when a client resends it within its MQTT session, and new for
// every new message, so that JetStream drops resends but never a message.
type Hook struct {
	mqtt.HookBase
	router   *Router
	broker   Broker
	rejected prometheus.Counter

	pipelines sync.Map // *mqtt.Client -> *pipeline
	sessions  sync.Map // client id -> *sessionEntry
}

// maxUnacked bounds one client's messages between arrival and PUBACK; it
// matches the receive maximum the broker advertises to MQTT 5 clients.
const maxUnacked = 1024

// NewHook returns the router's hook for the embedded broker.
func NewHook(r *Router, b Broker) *Hook {
	return &Hook{router: r, broker: b, rejected: r.metrics.mqttRefused}
}

// ID names the hook in mochi's logs.
func (h *Hook) ID() string { return "firehose-router" }

// Provides says which mochi events the hook handles.
func (h *Hook) Provides(b byte) bool {
	return bytes.IndexByte([]byte{mqtt.OnPublish, mqtt.OnSessionEstablish, mqtt.OnDisconnect, mqtt.OnClientExpired}, b) >= 0
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

// OnPublish routes one message from an MQTT client.
func (h *Hook) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if cl.Net.Inline || len(h.router.routes) == 0 {
		return pk, nil
	}
	p := h.pipelineFor(cl)
	msg := bus.Message{Topic: pk.TopicName, Payload: pk.Payload, QoS: pk.FixedHeader.Qos, Retain: pk.FixedHeader.Retain}
	// Once a client has messages in its pipeline, all its messages go
	// through it, so none overtakes another.
	if !p.busy() && !h.router.matchesAny(&msg) {
		return pk, nil
	}
	now := h.router.now()
	msg.Headers = map[string]string{
		bus.HeaderMsgID:      p.session.msgID(pk),
		bus.HeaderSource:     SourceMQTT,
		bus.HeaderReceivedAt: now.UTC().Format(time.RFC3339Nano),
	}
	if pk.FixedHeader.Qos == 2 {
		return h.routeNow(cl, pk, msg)
	}
	pk.Properties.TopicAliasFlag, pk.Properties.TopicAlias = false, 0 // the name is resolved already
	p.push(item{pk: pk, msg: msg})
	return pk, packets.ErrRejectPacket // the pipeline acks and delivers
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

// routeNow routes a QoS 2 message before mochi continues its handshake.
// When it cannot be made safe, an MQTT 5 client gets a PUBREC with reason
// "Quota exceeded", which ends the QoS 2 exchange without the message (mochi
// itself would answer an error from OnPublish with a PUBACK, which is not a
// QoS 2 packet); an MQTT 3.1.1 client is disconnected and resends.
func (h *Hook) routeNow(cl *mqtt.Client, pk packets.Packet, msg bus.Message) (packets.Packet, error) {
	if err := h.router.Route(context.Background(), msg); err != nil {
		// Too large for a required route: never delivered. MQTT 5 is told
		// why; MQTT 3.1.1 gets a PUBREC as if taken (see tooLarge), and
		// mochi completes the exchange at the PUBREL.
		if code, ok := h.tooLarge(cl, pk, err); ok {
			_ = cl.WritePacket(packets.Packet{
				FixedHeader: packets.FixedHeader{Type: packets.Pubrec},
				PacketID:    pk.PacketID,
				ReasonCode:  code.Code,
				Properties:  packets.Properties{ReasonString: code.Reason},
			})
			return pk, packets.ErrRejectPacket
		}
		h.refused(cl, pk, err)
		if cl.Properties.ProtocolVersion == 5 {
			_ = cl.WritePacket(packets.Packet{
				FixedHeader: packets.FixedHeader{Type: packets.Pubrec},
				PacketID:    pk.PacketID,
				ReasonCode:  packets.ErrQuotaExceeded.Code,
				Properties:  packets.Properties{ReasonString: packets.ErrQuotaExceeded.Reason},
			})
			return pk, packets.ErrRejectPacket
		}
		_ = h.broker.Disconnect(cl, packets.ErrServerBusy)
		return pk, packets.ErrRejectPacket
	}
	return pk, nil
}

// tooLarge answers for a publish too large for a required route (a
// *TooLargeError from Fit or Route; ok is false for any other error): an
// MQTT 5 client gets "quota exceeded" (0x97, the PUBACK code that fits)
// with a reason string naming the route and its limit; an MQTT 3.1.1 client
// has no negative ack, and a disconnect would make it resend the message
// forever, so it gets a success code and the message is dropped. Either
// way it is delivered nowhere, counted on the route as too_large, and logged.
func (h *Hook) tooLarge(cl *mqtt.Client, pk packets.Packet, err error) (code packets.Code, ok bool) {
	var tl *TooLargeError
	if !errors.As(err, &tl) {
		return packets.Code{}, false
	}
	h.router.log.Warn().Err(err).Str("client", cl.ID).Str("topic", pk.TopicName).Int("protocol", int(cl.Properties.ProtocolVersion)).
		Msg("an MQTT publish is too large for a required route; it is delivered nowhere (MQTT 5: refused with 0x97; MQTT 3.1.1: acknowledged and dropped)")
	if cl.Properties.ProtocolVersion < 5 {
		return packets.Code{Code: packets.CodeSuccess.Code}, true
	}
	return packets.Code{Code: packets.ErrQuotaExceeded.Code, Reason: tl.Reason()}, true
}

func (h *Hook) refused(cl *mqtt.Client, pk packets.Packet, err error) {
	h.rejected.Inc()
	h.router.log.Warn().Err(err).Str("client", cl.ID).Str("topic", pk.TopicName).
		Msg("an MQTT publish could not be made safe; refusing it so the client resends")
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

// pipeline carries one client's messages from OnPublish to PUBACK.
type pipeline struct {
	hook    *Hook
	cl      *mqtt.Client
	session *session
	slots   chan struct{} // one per message not yet acked; full blocks the client's reads
	acks    bytes.Buffer  // the PUBACKs of the batch being acked; only run uses it
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

// take waits for messages and returns up to replayBatch of them; nil once
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
	case n <= replayBatch:
		batch := p.items
		p.items = spare[:0]
		return batch
	default:
		batch := append(spare[:0], p.items[:replayBatch]...)
		p.items = append(p.items[:0], p.items[replayBatch:]...)
		return batch
	}
}

// run routes batches and then, in arrival order, delivers each message
// locally and acks it. A batch that cannot be made safe is refused: MQTT 5
// clients get PUBACKs with a reason code, MQTT 3.1.1 clients are
// disconnected without acks and resend when they reconnect. QoS 0 messages
// promise nothing and are delivered locally either way.
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
		v5 := p.cl.Properties.ProtocolVersion == 5
		if err != nil {
			h.refused(p.cl, batch[0].pk, err)
		}
		p.acks.Reset()
		for _, it := range batch {
			if it.tooLarge != nil {
				if code, _ := h.tooLarge(p.cl, it.pk, it.tooLarge); it.pk.FixedHeader.Qos == 1 {
					p.appendAckCode(it.pk.PacketID, code)
				}
				continue
			}
			if err == nil || it.pk.FixedHeader.Qos == 0 {
				if derr := h.broker.Deliver(it.pk); derr != nil {
					h.router.log.Debug().Err(derr).Str("topic", it.pk.TopicName).Msg("local delivery failed")
				}
			}
			if it.pk.FixedHeader.Qos == 1 && (err == nil || v5) {
				p.appendAck(it.pk.PacketID, err != nil)
			}
		}
		p.writeAcks()
		for range batch {
			<-p.slots
		}
		if err != nil && !v5 {
			_ = h.broker.Disconnect(p.cl, packets.ErrServerBusy)
		}
	}
}

// appendAck encodes a PUBACK into p.acks, with the quota-exceeded reason
// code when refused, as mochi's WritePacket would encode it for this client.
func (p *pipeline) appendAck(id uint16, refused bool) {
	code := packets.Code{Code: packets.CodeSuccess.Code}
	if refused {
		code = packets.ErrQuotaExceeded
	}
	p.appendAckCode(id, code)
}

// appendAckCode encodes a PUBACK with the given reason code and string (a
// success has none).
func (p *pipeline) appendAckCode(id uint16, code packets.Code) {
	ack := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Puback},
		PacketID:        id,
		ProtocolVersion: p.cl.Properties.ProtocolVersion,
		ReasonCode:      code.Code,
	}
	ack.Properties.ReasonString = code.Reason
	// [MQTT-3.1.2-29]: no reason string if the client asked for no problem information.
	ack.Mods.DisallowProblemInfo = p.cl.Properties.Props.RequestProblemInfoFlag && p.cl.Properties.Props.RequestProblemInfo == 0
	_ = ack.PubackEncode(&p.acks) // writing to a bytes.Buffer cannot fail
}

// writeAcks sends a batch's PUBACKs in one write instead of one write(2)
// per PUBACK through mochi's WritePacket, which costs the bridge and the
// client a system call per message. It takes the client's lock, as
// WritePacket does, so that packets are never interleaved. Unlike
// WritePacket it runs no OnPacketEncode/OnPacketSent hooks (the bridge has
// none for PUBACKs) and leaves mochi's bytes/packets sent counters alone.
// A failed write means the client is gone; it will resend.
func (p *pipeline) writeAcks() {
	if p.acks.Len() == 0 || p.cl.Closed() || p.cl.Net.Conn == nil {
		return
	}
	p.cl.Lock()
	defer p.cl.Unlock()
	_, _ = p.cl.Net.Conn.Write(p.acks.Bytes())
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
