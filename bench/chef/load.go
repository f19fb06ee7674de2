package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// child is a server process started from this binary.
type child struct {
	mode     string
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	httpAddr string
	mqttAddr string
}

// startChild re-runs this binary as a server and waits for its READY line.
// env are extra NAME=value settings.
func startChild(ctx context.Context, mode string, env ...string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(append(os.Environ(), serveEnv+"="+mode), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{mode: mode, cmd: cmd, stdin: stdin}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) != 3 || f[0] != "READY" {
		c.stop()
		return nil, fmt.Errorf("%s server did not start: %q %v", mode, line, err)
	}
	c.httpAddr, c.mqttAddr = f[1], f[2]
	return c, nil
}

// stop closes the child's stdin, which makes it shut down, and waits for it.
func (c *child) stop() {
	_ = c.stdin.Close()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// hwm reads the child's peak resident set size (VmHWM) in bytes.
func (c *child) hwm() (int64, error) { return procStatus(c.cmd.Process.Pid, "VmHWM") }

func procStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		return kb * 1024, err
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// cpu is the child's user+system CPU time so far, from /proc/<pid>/stat.
func (c *child) cpu() (time.Duration, error) { return procCPU(c.cmd.Process.Pid) }

func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces; the fields after it are fixed.
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	// Clock ticks are 1/100 s on Linux (USER_HZ).
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// selfCPU is this process's user+system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// subscriber counts what arrives on chef/#, the retained cookbook tallies
// (published on a timer, not per request) apart.
type subscriber struct {
	client   paho.Client
	received atomic.Int64
	bytes    atomic.Int64
	tallies  atomic.Int64
}

func subscribe(addr string) (*subscriber, error) {
	s := &subscriber{}
	opts := paho.NewClientOptions().AddBroker("tcp://" + addr).
		SetClientID(fmt.Sprintf("bench-chef-%d", time.Now().UnixNano())).
		SetCleanSession(true).SetAutoReconnect(false).SetProtocolVersion(4)
	s.client = paho.NewClient(opts)
	if tok := s.client.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return nil, fmt.Errorf("connect %s: %v", addr, tok.Error())
	}
	tok := s.client.Subscribe("chef/#", 1, func(_ paho.Client, m paho.Message) {
		if strings.HasSuffix(m.Topic(), "/versions") {
			s.tallies.Add(1)
			return
		}
		s.received.Add(1)
		s.bytes.Add(int64(len(m.Payload())))
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return nil, fmt.Errorf("subscribe: %v", tok.Error())
	}
	return s, nil
}

// waitFor polls until n messages have arrived or timeout passes.
func (s *subscriber) waitFor(n int64, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for s.received.Load() < n {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond) // polling a counter, not synchronising
	}
	return true
}

// result is one measurement of one server.
type result struct {
	Accepted int64         `json:"accepted"`
	Refused  int64         `json:"refused"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	// PerRequest is the bus messages one request produced (bridge only).
	PerRequest int64 `json:"per_request"`
	Expected   int64 `json:"expected"`
	Received   int64 `json:"received"`
	// ServerCPU is the server process's CPU time over the measurement,
	// ClientCPU the benchmark's own (HTTP clients, and the subscriber for the
	// bridge).
	ServerCPU time.Duration `json:"server_cpu_ns"`
	ClientCPU time.Duration `json:"client_cpu_ns"`
}

// cpuPerRequest is the server's CPU time per accepted request.
func (r result) cpuPerRequest() time.Duration {
	if r.Accepted == 0 {
		return 0
	}
	return r.ServerCPU / time.Duration(r.Accepted)
}

func (r result) rate() float64 { return float64(r.Accepted) / r.Elapsed.Seconds() }

// chefRequest is a POST as chef-client sends it.
func chefRequest(url string, body []byte) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-data-collector-token", "bench")
	req.Header.Set("x-data-collector-auth", "version=1.0")
	req.Header.Set("X-REMOTE-REQUEST-ID", "b3bbae70-1e93-4ffe-8499-9559601631fa")
	return req
}

// post sends one request and returns the status and body.
func post(client *http.Client, url string, body []byte) (int, []byte, error) {
	resp, err := client.Do(chefRequest(url, body))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// perRequest asks the bridge how many messages one request makes (from its
// answer), so that the subscriber's count can be checked.
func perRequest(client *http.Client, url string, body []byte) (int64, error) {
	code, b, err := post(client, url, body)
	if err != nil {
		return 0, err
	}
	var a struct {
		Messages int64 `json:"messages"`
	}
	if code != http.StatusOK || json.Unmarshal(b, &a) != nil || a.Messages == 0 {
		return 0, fmt.Errorf("bridge answered %d %s", code, b)
	}
	return a.Messages, nil
}

// load posts body with n concurrent clients for d and counts 2xx answers.
func load(ctx context.Context, url string, body []byte, clients int, d time.Duration) (result, error) {
	return loadWith(ctx, url, func() []byte { return body }, clients, d)
}

// loadWith is load with a body made for each request.
func loadWith(ctx context.Context, url string, next func() []byte, clients int, d time.Duration) (result, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	var accepted, refused atomic.Int64
	var firstErr error
	var once sync.Once
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				code, _, err := post(client, url, next())
				switch {
				case err != nil:
					once.Do(func() { firstErr = err })
					return
				case code/100 == 2:
					accepted.Add(1)
				default:
					refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	r := result{Accepted: accepted.Load(), Refused: refused.Load(), Elapsed: time.Since(start)}
	if firstErr != nil && !errors.Is(firstErr, context.DeadlineExceeded) {
		return r, firstErr
	}
	return r, nil
}
