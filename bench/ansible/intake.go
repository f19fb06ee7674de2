package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opsfirehose/firehose/bus"
	payload "github.com/opsfirehose/firehose/payloads/ansible"
	"github.com/opsfirehose/firehose/topics"
)

// intakeParams size the intake throughput benchmark.
type intakeParams struct {
	Batch, Senders, Rounds int
	Duration               time.Duration
	// Window is how far (in messages) senders may run ahead of the
	// subscriber.
	Window int
}

// rate is one throughput measurement.
type rate struct {
	Events  int64
	Elapsed time.Duration
}

func (r rate) PerSecond() float64 { return float64(r.Events) / r.Elapsed.Seconds() }

// intakeResult holds each round's rate through the HTTP intake, and the
// baseline: the same messages published straight into the broker.
type intakeResult struct {
	Intake, Bus []rate
}

// eventTemplate is a task event as the plugin sends it, about 700 bytes.
const eventTemplate = `{"event_id":"%08d-0000-4000-8000-%012d","status":"OK","host":"controller01.example.com",` +
	`"ansible_host":"web%03d.example.com","session":"8485e65b-dfad-44b1-866b-57b9861acadf","ansible_type":"task",` +
	`"playbook_name":"site","playbook_id":"ee0a8ba9-fe4a-4d5f-991c-4fd5637dc92d","ansible_task":"TASK: common : install packages",` +
	`"ansible_result":{"changed":false,"stdout":"","stderr":"","rc":0,"cmd":["dpkg-query","-W","openssh-server"],` +
	`"start":"2026-11-22 05:40:18.188135","end":"2026-11-22 05:40:18.202152","delta":"0:00:00.014017","msg":"",` +
	`"stdout_lines":["openssh-server\t1:9.2p1-2+deb12u3"],"stderr_lines":[],"results":[{"item":"openssh-server","changed":false}]}}`

// batches builds n request bodies of size events each, every event distinct.
func batches(n, size int) [][]byte {
	out := make([][]byte, n)
	seq := 0
	for i := range out {
		var b bytes.Buffer
		b.WriteByte('[')
		for j := 0; j < size; j++ {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, eventTemplate, i, seq, seq%100)
			seq++
		}
		b.WriteByte(']')
		out[i] = b.Bytes()
	}
	return out
}

// busBatches are the same events as messages, for the baseline.
func busBatches(bodies [][]byte) ([][]bus.Message, error) {
	now := time.Now()
	out := make([][]bus.Message, len(bodies))
	for i, body := range bodies {
		var events []json.RawMessage
		if err := json.Unmarshal(body, &events); err != nil {
			return nil, err
		}
		for _, ev := range events {
			var e struct {
				EventID     string `json:"event_id"`
				PlaybookID  string `json:"playbook_id"`
				AnsibleHost string `json:"ansible_host"`
				Status      string `json:"status"`
			}
			if err := json.Unmarshal(ev, &e); err != nil {
				return nil, err
			}
			topic, err := topics.Ansible{}.Task(e.PlaybookID, e.AnsibleHost, e.Status)
			if err != nil {
				return nil, err
			}
			// What the intake publishes: the event without its event_id.
			out[i] = append(out[i], bus.NewMessage("ansible", e.EventID, topic, payload.WithoutEventID(ev), now))
		}
	}
	return out, nil
}

// runIntake measures Rounds times each: events per second through POST
// /ansible/v1/events, and through broker.Publish alone, each until the
// subscriber has received every event. The order alternates per round.
func runIntake(ctx context.Context, p intakeParams, s *stack, progress io.Writer) (intakeResult, error) {
	bodies := batches(16, p.Batch)
	msgs, err := busBatches(bodies)
	if err != nil {
		return intakeResult{}, err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: p.Senders, MaxConnsPerHost: p.Senders}}
	defer client.CloseIdleConnections()

	post := func(i int) error {
		resp, err := client.Post(s.url, "application/json", bytes.NewReader(bodies[i%len(bodies)]))
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("intake answered %d", resp.StatusCode)
		}
		return nil
	}
	publish := func(i int) error {
		return s.broker.Publish(ctx, msgs[i%len(msgs)]...)
	}

	var res intakeResult
	for round := 0; round < p.Rounds; round++ {
		type kind struct {
			name string
			send func(int) error
			out  *[]rate
		}
		kinds := []kind{{"intake", post, &res.Intake}, {"bus", publish, &res.Bus}}
		if round%2 == 1 {
			kinds[0], kinds[1] = kinds[1], kinds[0]
		}
		for _, k := range kinds {
			r, err := measure(ctx, p, s, k.send)
			if err != nil {
				return res, fmt.Errorf("%s: %w", k.name, err)
			}
			*k.out = append(*k.out, r)
			fmt.Fprintf(progress, "  round %d %-6s %8.0f events/s (%d events in %v)\n",
				round+1, k.name, r.PerSecond(), r.Events, r.Elapsed.Round(time.Millisecond))
		}
	}
	return res, nil
}

// measure runs p.Senders goroutines calling send with batch numbers for
// p.Duration, then waits until the subscriber has every event, and returns
// the rate from the start to the last event received.
func measure(ctx context.Context, p intakeParams, s *stack, send func(int) error) (rate, error) {
	credit := make(chan struct{}, p.Window)
	s.credit.Store(&credit)
	defer s.credit.Store(nil)

	before := s.received.Load()
	var sent atomic.Int64
	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	stop := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < p.Senders; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				for j := 0; j < p.Batch; j++ {
					credit <- struct{}{}
				}
				if err := send(int(next.Add(1))); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				sent.Add(int64(p.Batch))
			}
		}()
	}
	timer := time.NewTimer(p.Duration)
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	close(stop)
	// Senders blocked on credit are released as the subscriber catches up.
	wg.Wait()
	if firstErr != nil {
		return rate{}, firstErr
	}
	if ctx.Err() != nil {
		return rate{}, ctx.Err()
	}
	n := sent.Load()
	end, err := s.waitReceived(ctx, before+n, 30*time.Second)
	if err != nil {
		return rate{}, err
	}
	if got := s.received.Load() - before; got != n {
		return rate{}, errors.New("the subscriber received more messages than were sent")
	}
	return rate{Events: n, Elapsed: end.Sub(start)}, nil
}
