package broker

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/rs/zerolog"
)

// delayedWills sees the delayed wills that mochi sends, whether or not it
// calls a hook for them.
//
// mochi sends a delayed will from its event loop once the delay is over.
// When it still knows the will's client (the session lives), it calls
// OnWillSent after it delivered the will; when the session ended first, it
// delivers the will and calls no hook, and the retained store and the
// history would never learn of it: a late subscriber would get the
// client's last status ("online"), not its will. The session ends first
// when the client's session expiry is 0 (mochi ends such a session at the
// disconnect, and still waits the delay), when the broker's
// max_session_expiry cuts the session short of the delay, or when both are
// due in the same second and mochi expires the session before it sends the
// will.
//
// So when a client that goes has a delayed will (OnWill), the broker
// subscribes inline to the will's topic. mochi hands inline subscribers a
// message before anyone else, and before it looks for the client: the
// handler sees the will when it is sent, whatever ended the session, and
// only then (a will that mochi drops, as when its client comes back, never
// reaches it). It does OnWillSent's work for every will it sees, and
// OnWillSent then leaves the will alone (took): had the handler asked
// whether the client is still known, a client that came back while mochi
// delivered the will would have had it done twice, or not at all.
//
// A will is forgotten once it is sent, when its client comes back (mochi
// has dropped the will by OnSessionEstablished), or willGrace after it was
// due (a will that mochi dropped some other way). Each costs its client id
// and topic and a timer, and the wills on one topic share an inline
// subscription (willTopic); mochi keeps the will itself as long.
type delayedWills struct {
	server *mqtt.Server
	// sent does what OnWillSent does for a will: keep it if it is
	// retained, count it and hand it to the recorder. The client is nil:
	// it may be gone, or be another connection under the will's client id.
	sent func(cl *mqtt.Client, pk packets.Packet)
	log  zerolog.Logger

	mu       sync.Mutex
	byClient map[string]*delayedWill
	byTopic  map[string]*willTopic
	lastID   int // the last inline subscription id, counting down from -1
	stopped  bool
	// taken is the last will the handler took, until OnWillSent asks
	// (took): mochi calls it for that will at once, on the same goroutine,
	// if at all.
	taken struct {
		client string
		due    int64
	}
}

// delayedWill is one client's will, waiting for its delay.
type delayedWill struct {
	client string
	on     *willTopic // its topic's subscription
	timer  *time.Timer
}

// willTopic is the inline subscription to a will topic, which every will
// watched for on that topic shares: with one each, mochi would hand each
// will to all of them, and a fleet whose nodes share one will topic would
// cost mochi's event loop the square of its size when they all go.
type willTopic struct {
	topic string
	id    int
	wills int           // watched for on it
	ready chan struct{} // closed once Subscribe has returned
}

// willGrace is how long after a will was due it is forgotten if mochi has
// not sent it: mochi looks for due wills once a second, on a loop a busy
// broker may keep waiting.
const willGrace = time.Minute

func newDelayedWills(server *mqtt.Server, sent func(*mqtt.Client, packets.Packet), log zerolog.Logger) *delayedWills {
	return &delayedWills{server: server, sent: sent, log: log, byClient: map[string]*delayedWill{}, byTopic: map[string]*willTopic{}}
}

// watch watches for the will on topic of the client client, which mochi
// sends delay from now unless the client comes back. It replaces what it
// watched for the client before, and returns once the will's topic is
// subscribed to: mochi sends the will only after OnWill has returned.
func (d *delayedWills) watch(client, topic string, delay time.Duration) {
	// A will topic is a topic name: as a filter, it matches itself alone.
	// One that is not (a wildcard, a shared subscription's prefix, which
	// mochi reads in any case) would be subscribed to as something else.
	// The auth hook refuses wildcards in a will's topic at the CONNECT.
	if topic == "" || strings.ContainsAny(topic, "+#") || len(topic) >= len("$share/") && strings.EqualFold(topic[:len("$share/")], "$share/") {
		return
	}
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return
	}
	var ended *willTopic
	if was := d.byClient[client]; was != nil {
		ended = d.dropLocked(was)
	}
	t := d.byTopic[topic]
	first := t == nil
	if first {
		d.lastID--
		t = &willTopic{topic: topic, id: d.lastID, ready: make(chan struct{})}
		d.byTopic[topic] = t
	}
	t.wills++
	w := &delayedWill{client: client, on: t}
	d.byClient[client] = w
	w.timer = time.AfterFunc(delay+willGrace, func() { d.forget(w) })
	d.mu.Unlock()
	d.unsubscribe(ended)
	if !first {
		<-t.ready // another will's watch subscribes to the topic
		return
	}
	err := d.server.Subscribe(topic, t.id, func(_ *mqtt.Client, _ packets.Subscription, pk packets.Packet) { d.onPublish(topic, pk) })
	d.mu.Lock()
	close(t.ready)
	current := d.byTopic[topic] == t
	if err != nil && current {
		delete(d.byTopic, topic) // its wills are forgotten as they would be (forget)
	}
	d.mu.Unlock()
	switch {
	case err != nil:
		d.log.Warn().Err(err).Str("client", client).Str("topic", topic).Msg("a delayed will is not watched for: if its session ends first, late subscribers and the history will not have it")
	case !current:
		// Every will on it was forgotten while it was being subscribed to
		// (its client came back: a takeover), and the Unsubscribe came
		// before the subscription.
		_ = d.server.Unsubscribe(topic, t.id)
	}
}

// onPublish is the inline subscriber of a will topic: it takes the will of
// a client watched for on it, which sendLWT marked with its delay, and
// nothing else published there.
func (d *delayedWills) onPublish(topic string, pk packets.Packet) {
	if pk.Connect.WillProperties.WillDelayInterval == 0 {
		return
	}
	d.mu.Lock()
	w := d.byClient[pk.Origin]
	if w == nil || w.on.topic != topic {
		d.mu.Unlock()
		return
	}
	ended := d.dropLocked(w)
	d.taken.client, d.taken.due = pk.Origin, pk.Expiry
	d.mu.Unlock()
	d.unsubscribe(ended)
	d.sent(nil, pk)
}

// took reports whether the handler took the delayed will of client due at
// due, which mochi calls OnWillSent for.
func (d *delayedWills) took(client string, due int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.taken.client != client || d.taken.due != due {
		return false
	}
	d.taken.client, d.taken.due = "", 0
	return true
}

// cameBack forgets the will of client, which came back: mochi dropped it
// when the client's session was established.
func (d *delayedWills) cameBack(client string) {
	d.mu.Lock()
	var ended *willTopic
	if w := d.byClient[client]; w != nil {
		ended = d.dropLocked(w)
	}
	d.mu.Unlock()
	d.unsubscribe(ended)
}

// forget stops watching for w, if it is still watched for.
func (d *delayedWills) forget(w *delayedWill) {
	d.mu.Lock()
	var ended *willTopic
	if d.byClient[w.client] == w {
		ended = d.dropLocked(w)
	}
	d.mu.Unlock()
	d.unsubscribe(ended)
}

// dropLocked stops watching for w, one of byClient, and returns its topic's
// subscription when w was the last will watched for on it (to unsubscribe,
// outside d.mu). Under d.mu.
func (d *delayedWills) dropLocked(w *delayedWill) *willTopic {
	delete(d.byClient, w.client)
	w.timer.Stop() // it may be running forget, which then finds w gone
	t := w.on
	if d.byTopic[t.topic] != t {
		return nil // not subscribed to: Subscribe failed
	}
	if t.wills--; t.wills > 0 {
		return nil
	}
	delete(d.byTopic, t.topic)
	return t
}

// unsubscribe ends t's subscription (nil: none to end). One still being
// made is ended by its maker (watch).
func (d *delayedWills) unsubscribe(t *willTopic) {
	if t != nil {
		_ = d.server.Unsubscribe(t.topic, t.id)
	}
}

// watching lists the clients whose wills are watched for, in order.
func (d *delayedWills) watching() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Sorted(maps.Keys(d.byClient))
}

// stop forgets every will, and watches for none from now on: the broker is
// closing, mochi's event loop with it, and the wills of the clients it
// disconnects will never be due.
func (d *delayedWills) stop() {
	d.mu.Lock()
	d.stopped = true
	for _, w := range d.byClient {
		w.timer.Stop()
	}
	topics := d.byTopic
	d.byClient, d.byTopic = map[string]*delayedWill{}, map[string]*willTopic{}
	d.mu.Unlock()
	for _, t := range topics {
		d.unsubscribe(t)
	}
}
