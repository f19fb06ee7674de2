package httpserver

import (
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Lingering: many clients send their whole request body before they read
// the answer (Python's urllib, chef-client's Ruby Net::HTTP). When a handler
// answers before the body is read (a 413 over max_body, a 401), closing the
// connection while such a client still sends makes the kernel reset it, and
// the reset throws away the answer the client has not read yet: it sees
// "connection reset by peer", never the 413. So, as nginx's lingering close
// does, the server sends the answer and then keeps reading and discarding
// the body, within bounds (http.linger_bytes, http.linger_time, and at most
// lingerIdle between two reads), before it closes. The connection is closed
// after such an answer ("Connection: close"), since what follows on it may
// be the rest of a body nobody read.

// lingerIdle bounds the wait for the next bytes while lingering, as nginx's
// lingering_timeout does: a client that stops sending has read the answer
// or is gone.
const lingerIdle = 5 * time.Second

// lingerBufferSize is the size of the buffers lingering reads into and
// throws away (Server.lingerBuffers).
const lingerBufferSize = 32 << 10

// trackedBody is a request body that counts what arrives and knows whether
// it was read to its end.
type trackedBody struct {
	io.ReadCloser
	received prometheus.Counter
	read     bool // Read was called: with Expect: 100-continue, the client was told to send
	ended    bool // EOF or an error: nothing more will come
	// atEnd runs once, when the body ends: it starts the write timeout.
	atEnd func()
}

func (b *trackedBody) Read(p []byte) (int, error) {
	b.read = true
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.received.Add(float64(n))
	}
	if err != nil && !b.ended {
		b.ended = true
		if b.atEnd != nil {
			b.atEnd()
		}
	}
	return n, err
}

// unread reports whether the client may still be sending body bytes that
// nobody read. A client that asked "Expect: 100-continue" and was never
// told to continue sends nothing more.
func (b *trackedBody) unread(r *http.Request) bool {
	if r.ContentLength == 0 || b.ended {
		return false
	}
	if !b.read && strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		return false
	}
	return true
}

// answering runs just before a handler's answer starts: when the body is
// not all read by then, the connection will be closed after the answer,
// and the body may be read after the answer is written (full duplex, which
// keeps net/http from discarding it, or refusing to read it, on its own).
func answering(w http.ResponseWriter, r *http.Request, b *trackedBody) bool {
	if !b.unread(r) {
		return false
	}
	w.Header().Set("Connection", "close")
	return http.NewResponseController(w).EnableFullDuplex() == nil
}

// linger sends the answer and reads what is left of the body, discarding
// it, until it ends or a bound is reached.
func (s *Server) linger(w http.ResponseWriter, b *trackedBody) {
	if s.cfg.LingerBytes <= 0 || s.cfg.LingerTime <= 0 {
		return
	}
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return
	}
	bufp := s.lingerBuffers.Get().(*[]byte)
	defer s.lingerBuffers.Put(bufp)
	buf := *bufp
	deadline := time.Now().Add(s.cfg.LingerTime)
	left := int64(s.cfg.LingerBytes)
	var discarded int64
	for left > 0 && !b.ended {
		now := time.Now()
		if !now.Before(deadline) {
			break
		}
		next := now.Add(lingerIdle)
		if next.After(deadline) {
			next = deadline
		}
		if err := rc.SetReadDeadline(next); err != nil {
			break
		}
		n, _ := b.Read(buf[:min(int64(len(buf)), left)])
		left -= int64(n)
		discarded += int64(n)
	}
	s.metrics.lingered.Add(float64(discarded))
}
