package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/broker/retained"
)

// The fleet's state: retained messages in our own store.
//
// mochi's retained store is where a big fleet costs (issue 25): a decoded
// packet and four maps per topic level in the heap for each message, a
// copy of the whole map every second to look for expired ones, every match
// copied into one slice for each late subscriber and then dropped past
// max_inflight. So mochi's retaining is off (Capabilities.RetainAvailable
// 0: mochi then skips its retainMessage, and reads the setting nowhere
// else but to refuse a CONNECT whose will is retained, see willRetainKey),
// and the broker keeps every retained message in a retained.Store: a
// publish's in retainTail, mochi's last OnPublish hook, which sees what
// every other hook let through; a will's in OnWillSent. mochi's index
// keeps only its own $SYS topics, so it finds nothing to send a late
// subscriber but $SYS, and the hook streams the subscriber's matches from
// the store itself, under flow control (stream.go), after the SUBACK and
// before any live message of the subscription.
//
// A retained publish is acknowledged once it is on disk: the hook holds the
// client's PUBACK in the connection's ack gate until the store's next group
// sync; Broker.Publish waits for the same sync before it returns.

type retainHook struct {
	mqtt.HookBase
	store   *retained.Store
	server  *mqtt.Server
	auth    *authHook
	maxHeld int
	dropped func(cl *mqtt.Client) func(topic []byte)
	log     zerolog.Logger

	mu      sync.Mutex
	clients map[*mqtt.Client]*clientStreams

	// recorder is handed every message delivered (Broker.SetRecorder,
	// before Start); nil: none.
	recorder Recorder
	// wills are the delayed wills whose session may end first (wills.go).
	wills *delayedWills
}

// clientStreams is one client's retained streams: the SUBSCRIBE packets
// whose retained messages are still to be written, in order, by one
// goroutine at a time.
type clientStreams struct {
	ctx     context.Context
	cancel  context.CancelFunc
	existed []bool // which filters of the SUBSCRIBE being handled the client had already
	began   bool
	queue   []streamJob
	running bool
}

type streamJob struct {
	subs   []packets.Subscription
	suback <-chan struct{}
}

func newRetainHook(store *retained.Store, server *mqtt.Server, auth *authHook, maxHeld int, dropped func(cl *mqtt.Client) func([]byte), log zerolog.Logger) *retainHook {
	h := &retainHook{store: store, server: server, auth: auth, maxHeld: maxHeld, dropped: dropped, log: log,
		clients: map[*mqtt.Client]*clientStreams{}}
	h.wills = newDelayedWills(server, h.willSent, log)
	return h
}

// ID names the hook in mochi's logs.
func (h *retainHook) ID() string { return "firehose-retained" }

// Provides lists the events the hook handles.
func (h *retainHook) Provides(b byte) bool {
	switch b {
	case mqtt.OnPacketRead, mqtt.OnWill, mqtt.OnSubscribe, mqtt.OnSubscribed, mqtt.OnDisconnect, mqtt.OnPublished, mqtt.OnWillSent,
		mqtt.OnSessionEstablished:
		return true
	}
	return false
}

// retainTail keeps retained publishes in the store. Broker.Start adds it
// after every other hook, so that it is the last to see a publish, as
// mochi's own retaining came after every OnPublish hook: a publish that a
// hook refuses (ErrRejectPacket), ignores (CodeSuccessIgnore) or takes to
// hand back later (the router's Release) stops the hooks before it.
type retainTail struct {
	mqtt.HookBase
	h *retainHook
}

// ID names the hook in mochi's logs.
func (t *retainTail) ID() string { return "firehose-retained-publish" }

// Provides lists the events the hook handles.
func (t *retainTail) Provides(b byte) bool { return b == mqtt.OnPublish }

// OnPublish keeps a retained publish that every other hook let through.
func (t *retainTail) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if pk.FixedHeader.Retain && !pk.Ignore {
		t.h.keep(cl, pk)
	}
	return pk, nil
}

// willRetainKey marks a will that its client asked to be retained: mochi,
// with its retaining off, would refuse the CONNECT, so OnPacketRead clears
// the flag and notes it in the will's user properties (which mochi's
// session store keeps with the will, across a restart), and OnWill sets it
// again before the will is sent. A client that put the key in its will
// itself gains nothing it could not ask for with the flag.
const willRetainKey = "\x00firehose: will retained"

// OnPacketRead takes a CONNECT's will retain flag into willRetainKey.
func (h *retainHook) OnPacketRead(_ *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if pk.FixedHeader.Type == packets.Connect && pk.Connect.WillFlag && pk.Connect.WillRetain {
		pk.Connect.WillRetain = false
		user := pk.Connect.WillProperties.User
		pk.Connect.WillProperties.User = append(user[:len(user):len(user)], packets.UserProperty{Key: willRetainKey, Val: "1"})
	}
	return pk, nil
}

// OnWill gives back a will the retain flag that OnPacketRead took, and
// keeps a will that goes at once before mochi delivers it, as mochi kept a
// retained publish. A delayed will is kept when it goes (OnWillSent, or
// delayedWills when its session ended first): its client may come back
// before.
func (h *retainHook) OnWill(cl *mqtt.Client, will mqtt.Will) (mqtt.Will, error) {
	delay := cl.Properties.Will.WillDelayInterval // what sendLWT decides by
	for i, p := range will.User {
		if p.Key != willRetainKey {
			continue
		}
		will.User = append(will.User[:i:i], will.User[i+1:]...)
		will.Retain = true
		if delay == 0 {
			h.keepWill(packets.Packet{
				FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: will.Qos, Retain: true},
				TopicName:   will.TopicName, Payload: will.Payload, Properties: packets.Properties{User: will.User},
			})
		}
		break
	}
	if delay > 0 {
		h.wills.watch(cl.ID, will.TopicName, time.Duration(delay)*time.Second)
	}
	return will, nil
}

// OnSessionEstablished forgets the delayed will of a client that came back:
// mochi dropped it.
func (h *retainHook) OnSessionEstablished(cl *mqtt.Client, _ packets.Packet) { h.wills.cameBack(cl.ID) }

func (h *retainHook) keepWill(pk packets.Packet) {
	pk.Expiry = 0 // mochi's time to send a delayed will, not an expiry
	if _, err := h.put(pk); err != nil {
		h.log.Error().Err(err).Str("topic", pk.TopicName).Msg("could not keep a retained will")
	}
}

// keep puts a retained publish in the store (an empty payload deletes),
// and makes the publisher's ack wait for the store's sync.
func (h *retainHook) keep(cl *mqtt.Client, pk packets.Packet) {
	topic := pk.TopicName
	seq, err := h.put(pk)
	if err != nil {
		h.log.Error().Err(err).Str("topic", topic).Msg("could not keep a retained message")
		return
	}
	if pk.FixedHeader.Qos == 0 || cl.Net.Inline || seq <= h.store.Synced() {
		return
	}
	if gc, ok := cl.Net.Conn.(*gatedConn); ok {
		gc.awaitDurable(pk.PacketID, seq)
	}
}

// put stores pk (an empty payload deletes its topic's message).
func (h *retainHook) put(pk packets.Packet) (uint64, error) {
	if len(pk.Payload) == 0 {
		return h.store.Delete(pk.TopicName)
	}
	b, err := encodeStored(pk)
	if err != nil {
		return 0, err
	}
	return h.store.Put(pk.TopicName, pk.Expiry, b)
}

// storedCompact marks a stored message kept as its QoS, user properties and
// payload, for a publish with no other properties (by far the most common):
// it skips mochi's property encoder and decoder, which cost a retained
// publish a tenth of its CPU. Any other stored message is a whole MQTT 5
// PUBLISH, whose first byte is 0x3n.
const storedCompact = 0x01

// encodeStored is how put stores pk: compact, or an MQTT 5 PUBLISH, which
// keeps its properties whatever the protocol of the client that published
// it or that later receives it. The expiry interval is not kept (a delivery
// says how long is left, from the deadline stored beside), nor what
// belongs to one connection (topic alias, subscription ids).
func encodeStored(pk packets.Packet) ([]byte, error) {
	p := &pk.Properties
	if !p.PayloadFormatFlag && p.ContentType == "" && p.ResponseTopic == "" && len(p.CorrelationData) == 0 {
		size := 4 + len(pk.Payload)
		fits := len(p.User) <= math.MaxUint16
		for _, u := range p.User {
			size += 4 + len(u.Key) + len(u.Val)
			fits = fits && len(u.Key) <= math.MaxUint16 && len(u.Val) <= math.MaxUint16
		}
		if fits {
			b := make([]byte, 0, size)
			b = append(b, storedCompact, pk.FixedHeader.Qos)
			b = binary.BigEndian.AppendUint16(b, uint16(len(p.User)))
			for _, u := range p.User {
				b = binary.BigEndian.AppendUint16(b, uint16(len(u.Key)))
				b = append(b, u.Key...)
				b = binary.BigEndian.AppendUint16(b, uint16(len(u.Val)))
				b = append(b, u.Val...)
			}
			return append(b, pk.Payload...), nil
		}
	}
	st := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Publish, Qos: pk.FixedHeader.Qos, Retain: true},
		TopicName:       pk.TopicName,
		Payload:         pk.Payload,
		Properties:      pk.Properties,
		PacketID:        1,
		ProtocolVersion: 5,
	}
	st.Properties.MessageExpiryInterval = 0
	st.Properties.TopicAlias, st.Properties.TopicAliasFlag = 0, false
	st.Properties.SubscriptionIdentifier = nil
	st.Mods.AllowResponseInfo = true // else mochi leaves out the response topic and correlation data
	var buf bytes.Buffer
	if err := st.PublishEncode(&buf); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return buf.Bytes(), nil
}

// decodeStored decodes what encodeStored made into pk's QoS, properties and
// payload (and, for a whole PUBLISH, its topic); pk's Payload and user
// properties share b.
func decodeStored(b []byte, pk *packets.Packet) error {
	if len(b) > 0 && b[0] == storedCompact {
		return decodeCompact(b, pk)
	}
	remaining, size, done, err := decodeLength(b)
	if err != nil || !done || len(b) < size+remaining {
		return fmt.Errorf("stored message is truncated")
	}
	if err := pk.FixedHeader.Decode(b[0]); err != nil {
		return err
	}
	pk.ProtocolVersion = 5
	return pk.PublishDecode(b[size : size+remaining])
}

func decodeCompact(b []byte, pk *packets.Packet) error {
	errTruncated := fmt.Errorf("stored message is truncated")
	if len(b) < 4 || b[1] > 2 {
		return errTruncated
	}
	pk.FixedHeader = packets.FixedHeader{Type: packets.Publish, Qos: b[1], Retain: true}
	pk.ProtocolVersion = 5
	n := int(binary.BigEndian.Uint16(b[2:]))
	b = b[4:]
	field := func() (string, bool) {
		if len(b) < 2 {
			return "", false
		}
		l := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+l {
			return "", false
		}
		f := string(b[2 : 2+l])
		b = b[2+l:]
		return f, true
	}
	if n > 0 {
		if n > len(b)/4 { // each takes 4 bytes at least: nothing allocated from a corrupt count
			return errTruncated
		}
		pk.Properties.User = make([]packets.UserProperty, 0, n)
	}
	for range n {
		k, ok := field()
		v, ok2 := field()
		if !ok || !ok2 {
			return errTruncated
		}
		pk.Properties.User = append(pk.Properties.User, packets.UserProperty{Key: k, Val: v})
	}
	pk.Payload = b
	return nil
}

// OnPublished and OnWillSent keep $SYS/broker/retained counting the
// store's messages too (mochi counts its own index, which holds only $SYS),
// and hand the recorder what mochi delivered.
func (h *retainHook) OnPublished(cl *mqtt.Client, pk packets.Packet) {
	if pk.FixedHeader.Retain {
		h.count()
	}
	if h.recorder != nil && !pk.Ignore {
		h.recorder.Published(cl, pk.TopicName, pk.Payload, pk.Properties.User)
	}
}

// OnWillSent counts a retained will and hands it to the recorder, as
// OnPublished does for a publish: mochi sends wills without OnPublished.
// A delayed will it keeps too (mochi has delivered it, and then would have
// retained it) unless delayedWills took it already: delayedWills takes
// the delayed wills as mochi sends them, also those whose session is gone
// by then, which mochi sends without OnWillSent.
func (h *retainHook) OnWillSent(cl *mqtt.Client, pk packets.Packet) {
	if pk.Connect.WillProperties.WillDelayInterval > 0 && h.wills.took(cl.ID, pk.Expiry) {
		return
	}
	h.willSent(cl, pk)
}

// willSent keeps, counts and records a will that mochi sent; cl is nil
// when delayedWills took it.
func (h *retainHook) willSent(cl *mqtt.Client, pk packets.Packet) {
	if pk.FixedHeader.Retain {
		if pk.Connect.WillProperties.WillDelayInterval > 0 { // set by sendLWT for a delayed will only
			h.keepWill(pk)
		}
		h.count()
	}
	if h.recorder != nil {
		h.recorder.Published(cl, pk.TopicName, pk.Payload, pk.Properties.User)
	}
}

func (h *retainHook) count() {
	atomic.StoreInt64(&h.server.Info.Retained, int64(h.server.Topics.Retained.Len()+h.store.Len()))
}

// OnSubscribe starts holding the client's live messages, before mochi adds
// the subscriptions, and notes which of them the client already had (for
// Retain Handling 1).
func (h *retainHook) OnSubscribe(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	gc, ok := cl.Net.Conn.(*gatedConn)
	if !ok || cl.Net.Inline {
		return pk
	}
	existed := make([]bool, len(pk.Filters))
	for i, f := range pk.Filters {
		_, existed[i] = cl.State.Subscriptions.Get(f.Filter)
	}
	cs := h.streams(cl)
	cs.existed, cs.began = existed, true
	gc.beginStream(h.maxHeld, h.dropped(cl))
	return pk
}

// OnSubscribed queues the retained messages of the filters granted, to be
// written once the SUBACK has left.
func (h *retainHook) OnSubscribed(cl *mqtt.Client, pk packets.Packet, codes []byte) {
	gc, ok := cl.Net.Conn.(*gatedConn)
	if !ok || cl.Net.Inline {
		return
	}
	h.mu.Lock()
	cs := h.clients[cl]
	h.mu.Unlock()
	if cs == nil || !cs.began {
		return
	}
	cs.began = false
	var subs []packets.Subscription
	for i, f := range pk.Filters {
		switch {
		case i >= len(codes) || codes[i] >= packets.ErrUnspecifiedError.Code:
		case mqtt.IsSharedFilter(f.Filter): // [MQTT-4.8.2] no retained messages for shared subscriptions
		case f.RetainHandling == 2, f.RetainHandling == 1 && i < len(cs.existed) && cs.existed[i]: // [MQTT-3.3.1-10] [MQTT-3.3.1-11]
		default:
			f.Qos = codes[i] // as granted
			subs = append(subs, f)
		}
	}
	if len(subs) == 0 {
		gc.endStream()
		return
	}
	job := streamJob{subs: subs, suback: gc.awaitSuback(pk.PacketID)}
	h.mu.Lock()
	cs.queue = append(cs.queue, job)
	start := !cs.running
	cs.running = true
	h.mu.Unlock()
	if start {
		go h.work(cl, gc, cs)
	}
}

// streams returns the client's streams, made on first use.
func (h *retainHook) streams(cl *mqtt.Client) *clientStreams {
	h.mu.Lock()
	defer h.mu.Unlock()
	cs := h.clients[cl]
	if cs == nil {
		ctx, cancel := context.WithCancel(context.Background())
		cs = &clientStreams{ctx: ctx, cancel: cancel}
		h.clients[cl] = cs
	}
	return cs
}

// OnDisconnect ends the client's streams, and tells the recorder.
func (h *retainHook) OnDisconnect(cl *mqtt.Client, _ error, _ bool) {
	if h.recorder != nil {
		h.recorder.Disconnected(cl)
	}
	h.mu.Lock()
	cs := h.clients[cl]
	delete(h.clients, cl)
	h.mu.Unlock()
	if cs == nil {
		return
	}
	cs.cancel()
	if gc, ok := cl.Net.Conn.(*gatedConn); ok {
		gc.stopStreams()
	}
}

// work writes the client's queued streams, one SUBSCRIBE at a time.
func (h *retainHook) work(cl *mqtt.Client, gc *gatedConn, cs *clientStreams) {
	for {
		h.mu.Lock()
		if len(cs.queue) == 0 {
			cs.running = false
			h.mu.Unlock()
			return
		}
		job := cs.queue[0]
		cs.queue = cs.queue[1:]
		h.mu.Unlock()
		select {
		case <-job.suback:
		case <-cs.ctx.Done():
		}
		for _, sub := range job.subs {
			if err := h.stream(cs.ctx, cl, gc, sub); err != nil {
				if cs.ctx.Err() == nil && err != errStreamEnded {
					h.log.Warn().Err(err).Str("client", cl.ID).Str("filter", sub.Filter).Msg("retained messages to a subscriber stopped")
				}
				break
			}
		}
		gc.endStream()
	}
}

// stream writes sub's retained messages to the client, as mochi would have
// (publishRetainedToClient): the read ACL per topic, the QoS as granted,
// the Retain flag set, the subscription identifier, the expiry left.
func (h *retainHook) stream(ctx context.Context, cl *mqtt.Client, gc *gatedConn, sub packets.Subscription) error {
	maxQoS := h.server.Options.Capabilities.MaximumQos
	info := h.server.Info
	var buf bytes.Buffer
	return h.store.Scan(ctx, sub.Filter, func(m retained.Message) error {
		if !h.auth.OnACLCheck(cl, m.Topic, false) {
			return nil
		}
		var pk packets.Packet
		if err := decodeStored(m.Value, &pk); err != nil {
			h.log.Error().Err(err).Str("topic", m.Topic).Msg("skipped a stored retained message that does not decode")
			return nil
		}
		qos := min(pk.FixedHeader.Qos, sub.Qos, maxQoS)
		if err := gc.waitRoom(qos); err != nil {
			return err
		}
		now := time.Now().Unix()
		out := packets.Packet{
			FixedHeader:     packets.FixedHeader{Type: packets.Publish, Qos: qos, Retain: true},
			TopicName:       m.Topic,
			Payload:         pk.Payload,
			Properties:      pk.Properties,
			ProtocolVersion: cl.Properties.ProtocolVersion,
			Created:         now,
			Expiry:          m.Deadline,
			Origin:          pk.Origin,
		}
		out.Properties.SubscriptionIdentifier = nil
		if sub.Identifier > 0 {
			out.Properties.SubscriptionIdentifier = []int{sub.Identifier} // [MQTT-3.3.4-3]
		}
		if m.Deadline > 0 {
			out.Properties.MessageExpiryInterval = uint32(max(m.Deadline-now, 1)) // [MQTT-3.3.2-6]
		}
		out.Mods.MaxSize = cl.Properties.Props.MaximumPacketSize
		out.Mods.AllowResponseInfo = true
		if qos > 0 {
			id, err := cl.NextPacketID()
			if err != nil {
				return fmt.Errorf("no packet id free: %w", err)
			}
			out.PacketID = uint16(id)
			out.Payload = bytes.Clone(pk.Payload) // m.Value is the Scan's, and mochi may resend it
			out.TopicName = strings.Clone(m.Topic)
			if cl.State.Inflight.Set(out) {
				atomic.AddInt64(&info.Inflight, 1)
			}
		}
		buf.Reset()
		if err := out.PublishEncode(&buf); err != nil {
			return h.unreserve(cl, out, fmt.Errorf("encode %s: %w", m.Topic, err))
		}
		if out.Mods.MaxSize > 0 && uint32(buf.Len()) > out.Mods.MaxSize {
			return h.unreserve(cl, out, nil) // [MQTT-3.1.2-25] too large for this client: not sent
		}
		if err := gc.writeOwn(buf.Bytes(), out.PacketID, qos); err != nil {
			return err
		}
		atomic.AddInt64(&info.MessagesSent, 1)
		atomic.AddInt64(&info.PacketsSent, 1)
		atomic.AddInt64(&info.BytesSent, int64(buf.Len()))
		return nil
	})
}

// unreserve gives back the packet id of a message not sent, and returns err.
func (h *retainHook) unreserve(cl *mqtt.Client, out packets.Packet, err error) error {
	if out.FixedHeader.Qos > 0 && cl.State.Inflight.Delete(out.PacketID) {
		atomic.AddInt64(&h.server.Info.Inflight, -1)
	}
	return err
}

// Stop closes the store (mochi stops its hooks when it closes).
func (h *retainHook) Stop() error {
	h.wills.stop()
	return h.store.Close()
}
