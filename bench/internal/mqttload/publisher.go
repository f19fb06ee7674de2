package mqttload

import (
	"sync/atomic"
	"time"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
)

// Publisher publishes its client's template as fast as allowed: at QoS 1
// with at most a window of unacknowledged messages, mapping each PUBACK back
// to the sequence number it acknowledges.
//
// Run is called once, from one goroutine. Acked may be read at any time;
// Sent once Run has returned; AckedSet, UnexpectedAcks and Latency (owned
// by the client's reader goroutine) only once the client is closed.
type Publisher struct {
	c     *Client
	qos   byte
	sem   chan struct{} // QoS 1 in-flight window
	sent  atomic.Uint64 // messages handed to the client, set when Run returns
	acked atomic.Int64
	limit uint64 // Run returns after this many messages; 0: no limit
	// messages, when set, gives each message's topic and payload instead
	// of the client's template; retain is their retain flag.
	messages func(seq uint64) (topic string, payload []byte)
	retain   bool
	last     atomic.Int64 // UnixNano of the last PUBACK

	// QoS 1: packet id -> busy flag | sequence, so PUBACKs can be mapped to
	// sequence numbers exactly.
	pidSeq     []atomic.Uint64
	sentAt     []atomic.Int64 // packet id -> UnixNano queued; nil unless latency is tracked
	ackedSet   benchkit.Bitset
	unexpected int64 // PUBACKs for packet ids not in flight
	latency    *benchkit.Histogram
}

const pidBusy = 1 << 63

// NewPublisher prepares a publisher on c, which must not be started yet:
// at QoS 1 it takes c's OnPuback. inflight bounds unacknowledged QoS 1
// publishes. With trackLatency, each PUBACK's latency is recorded, from the
// moment Run queued the PUBLISH to the moment the PUBACK was read.
func NewPublisher(c *Client, qos byte, inflight int, trackLatency bool) *Publisher {
	p := &Publisher{c: c, qos: qos}
	if qos > 0 {
		p.sem = make(chan struct{}, inflight)
		p.pidSeq = make([]atomic.Uint64, 1<<16)
		if trackLatency {
			p.sentAt = make([]atomic.Int64, 1<<16)
			p.latency = new(benchkit.Histogram)
		}
		c.OnPuback = p.onPuback
	}
	return p
}

// SetLimit makes Run return once it has handed n messages to the client
// (0: no limit, the default). Call it before Run.
func (p *Publisher) SetLimit(n uint64) { p.limit = n }

// SetMessages makes Run publish, as message seq, the topic and payload
// next(seq) returns, as they are (not the client's template), retained when
// retain is set. The payload must not change once returned. Call it before
// Run.
func (p *Publisher) SetMessages(next func(seq uint64) (topic string, payload []byte), retain bool) {
	p.messages, p.retain = next, retain
}

// LastAck is when the last PUBACK arrived; zero before the first.
func (p *Publisher) LastAck() time.Time {
	if ns := p.last.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// Client is the publisher's connection.
func (p *Publisher) Client() *Client { return p.c }

// Acked is the number of PUBACKs received for messages in flight.
func (p *Publisher) Acked() int64 { return p.acked.Load() }

// Sent is the number of messages handed to the client; valid once Run has returned.
func (p *Publisher) Sent() uint64 { return p.sent.Load() }

// AckedSet holds the sequence numbers acknowledged (QoS 1).
func (p *Publisher) AckedSet() *benchkit.Bitset { return &p.ackedSet }

// UnexpectedAcks counts PUBACKs for packet ids that were not in flight.
func (p *Publisher) UnexpectedAcks() int64 { return p.unexpected }

// Latency is the publish-to-PUBACK histogram; nil unless tracked.
func (p *Publisher) Latency() *benchkit.Histogram { return p.latency }

func (p *Publisher) onPuback(pid uint16) {
	// Read the send time before freeing the packet id: Run reuses an id
	// only once it is free.
	var sentAt int64
	if p.sentAt != nil {
		sentAt = p.sentAt[pid].Load()
	}
	v := p.pidSeq[pid].Swap(0)
	if v&pidBusy == 0 {
		p.unexpected++
		return
	}
	now := time.Now().UnixNano()
	if p.latency != nil {
		p.latency.Record(now - sentAt)
	}
	p.last.Store(now)
	p.ackedSet.Set(v &^ pidBusy)
	p.acked.Add(1)
	select {
	case <-p.sem:
	default:
	}
}

// Run publishes until stop is closed, the connection dies or it has sent
// the limit (SetLimit); rate > 0 paces it to that many msgs/s from t0
// (catching up when behind). With a window of 1 (NewPublisher's inflight),
// each QoS 1 message waits for the PUBACK of the one before: the shape of
// the widely used mqtt-benchmark.
func (p *Publisher) Run(stop <-chan struct{}, t0 time.Time, rate float64) {
	var pid uint16
	var interval time.Duration
	var pace *time.Timer
	if rate > 0 {
		interval = time.Duration(float64(time.Second) / rate)
		pace = time.NewTimer(time.Hour)
		defer pace.Stop()
	}
	for seq := uint64(0); ; seq++ {
		if p.limit > 0 && seq >= p.limit {
			p.sent.Store(seq)
			return
		}
		select {
		case <-stop:
			p.sent.Store(seq)
			return
		default:
		}
		if interval > 0 {
			// Behind schedule: send at once (catch up); ahead: wait.
			if d := time.Until(t0.Add(time.Duration(seq) * interval)); d > 0 {
				pace.Reset(d)
				select {
				case <-stop:
					p.sent.Store(seq)
					return
				case <-pace.C:
				}
			}
		}
		if p.qos > 0 {
			select {
			case p.sem <- struct{}{}:
			case <-stop:
				p.sent.Store(seq)
				return
			case <-p.c.dead:
				p.sent.Store(seq)
				return
			}
			for {
				pid++
				if pid == 0 {
					pid = 1
				}
				if p.pidSeq[pid].Load()&pidBusy == 0 {
					break
				}
			}
			if p.sentAt != nil {
				p.sentAt[pid].Store(time.Now().UnixNano())
			}
			p.pidSeq[pid].Store(pidBusy | seq)
		}
		ok := false
		if p.messages != nil {
			topic, payload := p.messages(seq)
			ok = p.c.PublishMessage(topic, payload, p.qos, p.retain, pid)
		} else {
			ok = p.c.Publish(p.qos, pid, seq)
		}
		if !ok {
			p.sent.Store(seq)
			return
		}
	}
}
