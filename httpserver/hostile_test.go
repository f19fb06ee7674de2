package httpserver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/opsfirehose/firehose/internal/bytesize"
	"github.com/opsfirehose/firehose/internal/testkit"
)

// startEcho serves POST /in, which reads the body with ReadBody up to max
// and answers with its length, and POST /auth, which refuses every request
// with a 401 before reading anything, as a wrong token does.
func startEcho(t *testing.T, max bytesize.Size, cfg Config) *Server {
	t.Helper()
	cfg.Address = "127.0.0.1:0"
	s, err := New(cfg, Options{Logger: zerolog.Nop(), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	s.Handle("POST /in", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := ReadBody(w, r, max)
		if ok {
			WriteJSON(w, http.StatusOK, map[string]int{"bytes": len(body)})
		}
	}))
	tokens := NewTokens([]Token{{Token: "secret"}})
	s.Handle("POST /auth", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := Authenticate(w, r, tokens, "Authorization"); ok {
			WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		}
	}))
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// dial opens a raw connection to s, closed when the test ends.
func dial(t *testing.T, s *Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestSlowBodiesCostWhatArrives: 50 requests that claim 32 MiB bodies and
// send one byte each cost what arrived, not what they claimed. Before,
// ReadBody sized its buffer from Content-Length: 50 × 32 MiB = 1.6 GiB of
// heap, held until read_timeout.
func TestSlowBodiesCostWhatArrives(t *testing.T) {
	s := startEcho(t, 64*bytesize.MiB, DefaultConfig())
	const conns = 50
	before := heapAlloc()
	for i := 0; i < conns; i++ {
		c := dial(t, s)
		if _, err := fmt.Fprintf(c, "POST /in HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\nx", 32<<20); err != nil {
			t.Fatal(err)
		}
	}
	// Each handler has its buffer once it has read its byte.
	testkit.Eventually(t, func() bool { return testutil.ToFloat64(s.metrics.bodyBytes) == conns },
		"the %d handlers to read their first byte", conns)
	if got := testutil.ToFloat64(s.metrics.inFlight); got != conns {
		t.Fatalf("%v requests in flight, want %d", got, conns)
	}
	growth := int64(heapAlloc()) - int64(before)
	t.Logf("heap growth with %d requests claiming 32 MiB, one byte sent each: %d KiB", conns, growth>>10)
	if growth > 64<<20 {
		t.Fatalf("heap grew by %d MiB for %d one-byte bodies", growth>>20, conns)
	}
}

// TestReadBodyGrowsWithWhatArrives: bodies of every size come back whole,
// with Content-Length or chunked, and one byte over the limit is a 413.
func TestReadBodyGrowsWithWhatArrives(t *testing.T) {
	const max = 1 << 20
	s := startEcho(t, max, DefaultConfig())
	for _, size := range []int{0, 1, firstBuffer - 1, firstBuffer, firstBuffer + 1, 100_000, max - 1, max, max + 1} {
		for _, chunked := range []bool{false, true} {
			var body io.Reader = strings.NewReader(strings.Repeat("x", size))
			if chunked {
				body = io.MultiReader(body) // hides the length: sent chunked
			}
			req, _ := http.NewRequest("POST", "http://"+s.Addr()+"/in", body)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want, wantCode := fmt.Sprintf(`{"bytes":%d}`, size), 200
			if size > max {
				want, wantCode = "over the limit of 1MiB (max_body)", 413
			}
			if resp.StatusCode != wantCode || !strings.Contains(string(got), want) {
				t.Errorf("%d bytes (chunked %v): %d %s", size, chunked, resp.StatusCode, got)
			}
		}
	}
}

// TestLargeBodyAnswerIsReadable: a client that sends its whole body before
// it reads the answer, as Python's urllib and chef-client's Net::HTTP do,
// reads the 413 (or the 401) for a 40 MB body instead of a connection reset.
func TestLargeBodyAnswerIsReadable(t *testing.T) {
	python := testkit.RequireCommand(t, "python3")
	s := startEcho(t, 8*bytesize.MiB, DefaultConfig())
	script := `
import sys, urllib.request, urllib.error
url, mode = sys.argv[1], sys.argv[2]
body = b"x" * (40 * 1000 * 1000)
data = body if mode == "length" else iter([body[i:i + 65536] for i in range(0, len(body), 65536)])
req = urllib.request.Request(url, data=data, method="POST")
if mode == "chunked":
    req.add_header("Transfer-Encoding", "chunked")
try:
    resp = urllib.request.urlopen(req, timeout=60)
    print(resp.status, resp.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
`
	for _, tt := range []struct{ path, mode, want string }{
		{"/in", "length", `413 {"error":"body of 40000000B is over the limit of 8MiB (max_body)"}`},
		{"/in", "chunked", `413 {"error":"body is over the limit of 8MiB (max_body)"}`},
		{"/auth", "length", `401 {"error":"missing token: send it in Authorization"}`},
	} {
		out, err := exec.Command(python, "-c", script, "http://"+s.Addr()+tt.path, tt.mode).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != tt.want {
			t.Errorf("%s (%s): %v\n%s\nwant %s", tt.path, tt.mode, err, out, tt.want)
		}
	}
	if got := testutil.ToFloat64(s.metrics.lingered); got < 30e6 {
		t.Errorf("lingered over %v bytes, want most of the 3 × 40 MB", got)
	}
}

// TestNoLingerWithoutContinue: a client that asks "Expect: 100-continue"
// and is answered 413 at once is never told to send, so the server neither
// sends "100 Continue" nor waits for a body that will not come.
func TestNoLingerWithoutContinue(t *testing.T) {
	s := startEcho(t, 8*bytesize.MiB, DefaultConfig())
	c := dial(t, s)
	fmt.Fprintf(c, "POST /in HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", 40<<20)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body) // to the end: the server closes the connection after it
	if resp.StatusCode != 413 || !resp.Close || !strings.Contains(string(body), "over the limit") {
		t.Fatalf("%d close=%v %s", resp.StatusCode, resp.Close, body)
	}
	if got := testutil.ToFloat64(s.metrics.lingered); got != 0 {
		t.Fatalf("lingered over %v bytes", got)
	}
}

// TestLingerBounded: lingering stops at linger_bytes, and the connection is
// closed after it; with lingering off a 413 still gets out to a client that
// reads while it sends.
func TestLingerBounded(t *testing.T) {
	cfg := DefaultConfig()
	cfg.LingerBytes = 1 * bytesize.MiB
	s := startEcho(t, 64<<10, cfg)
	c := dial(t, s)
	fmt.Fprintf(c, "POST /in HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", 1<<30)
	done := make(chan error, 1)
	go func() { // sends until the server closes
		chunk := make([]byte, 64<<10)
		for {
			if _, err := c.Write(chunk); err != nil {
				done <- err
				return
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Fatalf("%d", resp.StatusCode)
	}
	if err := <-done; err == nil {
		t.Fatal("the server kept reading a 1 GiB body")
	}
	lingered := testutil.ToFloat64(s.metrics.lingered)
	if lingered > 1<<20 || lingered == 0 {
		t.Fatalf("lingered over %v bytes, want at most linger_bytes (1 MiB)", lingered)
	}
}

// TestSlowlorisCostsLittle: connections that trickle headers and never end
// them cost a few KiB each until ReadHeaderTimeout closes them; this
// measures the cost (the closing itself is net/http's, set by New).
func TestSlowlorisCostsLittle(t *testing.T) {
	s := startEcho(t, bytesize.MiB, DefaultConfig())
	const conns = 500
	before := heapAlloc()
	goroutines := runtime.NumGoroutine()
	var open []net.Conn
	for i := 0; i < conns; i++ {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
		if _, err := io.WriteString(c, "POST /in HTTP/1.1\r\nHost: x\r\nX-Slow: "); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, func() bool { return testutil.ToFloat64(s.metrics.conns) == conns }, "%d connections open", conns)
	growth := int64(heapAlloc()) - int64(before)
	t.Logf("%d connections with unfinished headers: heap +%d KiB (%d B each), goroutines +%d",
		conns, growth>>10, growth/conns, runtime.NumGoroutine()-goroutines)
	if growth > conns*16<<10 {
		t.Errorf("heap grew by %d KiB a connection", growth/conns>>10)
	}
	for _, c := range open {
		c.Close()
	}
	testkit.Eventually(t, func() bool { return testutil.ToFloat64(s.metrics.conns) == 0 }, "the connections to close")
}

// TestSlowUploadStillGetsItsAnswer: write_timeout counts from the end of the
// body. net/http counts it from the end of the headers, so a body that took
// longer than write_timeout to arrive (within read_timeout) was read and
// handled, and then its answer could not be written: the client saw the
// connection close, though the message had been published, and sent it
// again.
func TestSlowUploadStillGetsItsAnswer(t *testing.T) {
	cfg := DefaultConfig()
	cfg.WriteTimeout = 2 * time.Second
	s := startEcho(t, 64<<10, cfg)
	c := dial(t, s)
	fmt.Fprintf(c, "POST /in HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\na")
	// The rest of the body comes after write_timeout has passed since the
	// headers: a wait for a moment in time, which a slow machine only
	// makes later, so the test cannot pass by luck.
	time.Sleep(cfg.WriteTimeout + 500*time.Millisecond)
	if _, err := c.Write([]byte("b")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a body that ended after write_timeout: %v", err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(got), `"bytes":2`) {
		t.Fatalf("answer %d %q (%v), want 200 with the body's length", resp.StatusCode, got, err)
	}
}
