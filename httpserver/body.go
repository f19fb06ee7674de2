package httpserver

import (
	"errors"
	"io"
	"net/http"

	"github.com/opsfirehose/firehose/internal/bytesize"
)

// ErrBodyTooLarge is wrapped by every *BodyTooLargeError.
var ErrBodyTooLarge = errors.New("request body too large")

// BodyTooLargeError is a request body over an endpoint's max_body.
type BodyTooLargeError struct {
	// Limit is the endpoint's max_body.
	Limit bytesize.Size
	// Claimed is what Content-Length said, when it said more than Limit up
	// front; 0 when the body was found too large while reading it.
	Claimed int64
	// What names the body in the message: "body", or "stream" for a
	// decompressed one.
	What string
}

func (e *BodyTooLargeError) Error() string {
	what := e.What
	if what == "" {
		what = "body"
	}
	if e.Claimed > 0 {
		return what + " of " + bytesize.Size(e.Claimed).String() + " is over the limit of " + e.Limit.String() + " (max_body)"
	}
	return what + " is over the limit of " + e.Limit.String() + " (max_body)"
}

// Unwrap returns ErrBodyTooLarge.
func (e *BodyTooLargeError) Unwrap() error { return ErrBodyTooLarge }

// firstBuffer is the most ReadAll allocates before bytes arrive: a body that
// claims 32 MiB and sends one byte costs this, not 32 MiB.
const firstBuffer = 16 << 10

// ReadAll reads the request body into memory, up to max bytes; a larger one
// is a *BodyTooLargeError, found from Content-Length before anything is read
// when it says so. The buffer grows with the bytes that actually arrive,
// never from the length the client claims: it starts at no more than 16 KiB
// and grows fourfold, up to Content-Length when that is known (so a body
// that comes whole ends in a buffer of its own size), or max+1. The buffer
// is never more than four times what arrived; a body of n bytes costs about
// n/3 more allocation, and n/3 of copying, than a buffer sized from a
// trusted length would (BenchmarkReadAll).
func ReadAll(r *http.Request, max bytesize.Size) ([]byte, error) {
	limit := int64(max)
	if r.ContentLength > limit {
		return nil, &BodyTooLargeError{Limit: max, Claimed: r.ContentLength}
	}
	// One byte over the expected size lets the reader see EOF (or a body
	// over max) without growing the buffer again.
	ceiling := limit + 1
	if r.ContentLength >= 0 {
		ceiling = r.ContentLength + 1
	}
	buf := make([]byte, 0, min(ceiling, firstBuffer))
	for {
		if len(buf) == cap(buf) {
			// len(buf) <= limit here, so this grows. Fourfold rather than
			// twofold halves the copies of a large body; the +1 takes a
			// body of exactly a power of four to its ceiling in one step.
			grown := min(4*int64(cap(buf))+1, limit+1)
			if int64(cap(buf)) < ceiling {
				grown = min(grown, ceiling)
			}
			next := make([]byte, len(buf), grown)
			copy(next, buf)
			buf = next
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, &BodyTooLargeError{Limit: max}
		}
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// LimitBody returns the request body as a reader that fails with a
// *BodyTooLargeError once more than max bytes arrived, or at the first Read
// when Content-Length already says so. It is for handlers that stream a
// body instead of holding it (a subunit stream).
func LimitBody(r *http.Request, max bytesize.Size) io.Reader {
	if r.ContentLength > int64(max) {
		return errReader{&BodyTooLargeError{Limit: max, Claimed: r.ContentLength}}
	}
	return &LimitedReader{R: r.Body, Left: int64(max), Err: &BodyTooLargeError{Limit: max}}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// LimitedReader reads from R and fails with Err, rather than stopping
// quietly as io.LimitReader does, when R holds more than Left bytes. A
// stream that ends exactly at the limit is fine.
type LimitedReader struct {
	R    io.Reader
	Left int64
	Err  error
}

func (l *LimitedReader) Read(p []byte) (int, error) {
	if l.Left <= 0 {
		// Probe for one more byte: a stream that ends exactly at the limit is fine.
		var one [1]byte
		n, err := l.R.Read(one[:])
		if n > 0 {
			return 0, l.Err
		}
		return 0, err
	}
	if int64(len(p)) > l.Left {
		p = p[:l.Left]
	}
	n, err := l.R.Read(p)
	l.Left -= int64(n)
	return n, err
}

// ReadBody reads the whole request body with ReadAll. A body over max is
// answered 413, a body cut short 400; ok is false when an answer was
// written. Either way the server keeps reading, and discarding, what the
// client still sends, up to http.linger_bytes and http.linger_time, so that
// a client that sends its whole body before reading the answer still reads
// it (see Server).
func ReadBody(w http.ResponseWriter, r *http.Request, max bytesize.Size) (body []byte, ok bool) {
	body, err := ReadAll(r, max)
	if err != nil {
		WriteBodyError(w, err)
		return nil, false
	}
	return body, true
}

// WriteBodyError answers for an error reading a request body: 413 for a
// *BodyTooLargeError, 400 otherwise (a body cut short, a read timeout).
func WriteBodyError(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrBodyTooLarge) {
		WriteError(w, http.StatusRequestEntityTooLarge, err.Error(), "")
		return
	}
	WriteError(w, http.StatusBadRequest, "reading the body: "+err.Error(), "")
}
