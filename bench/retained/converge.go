package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
	"github.com/opsfirehose/firehose/bench/internal/mqttload"
)

// convergePath is the Chef data collector's endpoint.
const convergePath = "/data-collector/v0/"

// fixture is the converge POSTed to the bridge, and what renaming its node
// needs.
type fixture struct {
	body     []byte
	org      string
	runID    string
	nodeName string
	// nameAt is the offset of the top-level node_name's value in body.
	nameAt int
}

// readFixture reads a run_converge whose top-level node_name has the
// length of the fleet's node names.
func readFixture(path string) (*fixture, error) {
	body, err := os.ReadFile(fixturePath(path))
	if err != nil {
		return nil, err
	}
	var top struct {
		Type  string `json:"message_type"`
		Node  string `json:"node_name"`
		Org   string `json:"organization_name"`
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, fmt.Errorf("fixture %s: %w", path, err)
	}
	if top.Type != "run_converge" || top.Org == "" || top.RunID == "" {
		return nil, fmt.Errorf("fixture %s: want a run_converge with organization_name and run_id", path)
	}
	if len(top.Node) != len(nodeName(0)) {
		return nil, fmt.Errorf("fixture %s: node_name %q must be %d characters long, as the fleet's names are", path, top.Node, len(nodeName(0)))
	}
	at := -1
	for _, sep := range []string{`"node_name": "`, `"node_name":"`} {
		if i := bytes.Index(body, []byte(sep+top.Node+`"`)); i >= 0 {
			at = i + len(sep)
			break
		}
	}
	if at < 0 {
		return nil, fmt.Errorf("fixture %s: cannot find its node_name to replace", path)
	}
	return &fixture{body: body, org: top.Org, runID: top.RunID, nodeName: top.Node, nameAt: at}, nil
}

// forNode is the fixture's body as node i's converge.
func (f *fixture) forNode(i int) []byte {
	b := bytes.Clone(f.body)
	copy(b[f.nameAt:], nodeName(i))
	return b
}

// fixturePath resolves a path relative to the module's root.
func fixturePath(path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	if root, err := benchkit.ModuleRoot(); err == nil {
		return filepath.Join(root, path)
	}
	return path
}

// converger POSTs converges of fleet nodes to a bridge.
type converger struct {
	url    string
	client *http.Client
	bodies [][]byte // node i's converge
}

func newConverger(s *server, f *fixture, nodes int) *converger {
	c := &converger{url: "http://" + s.httpAddr + convergePath,
		client: &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	for i := range nodes {
		c.bodies = append(c.bodies, f.forNode(i))
	}
	return c
}

// post POSTs node i's converge as chef-client does, and checks the answer.
func (c *converger) post(ctx context.Context, i int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(c.bodies[i]))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Data-Collector-Auth", "version=1.0")
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("converge POST: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("converge POST: %s: %s", resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// postAll POSTs n converges from clients goroutines, cycling over the
// nodes; it returns the first error.
func (c *converger) postAll(ctx context.Context, n, clients int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		wg.Go(func() {
			for {
				k := int(next.Add(1)) - 1
				if k >= n {
					return
				}
				if err := c.post(ctx, k%len(c.bodies)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// convergeCPU is the bridge's CPU per converge.
type convergeCPU struct {
	// Rounds are each round's CPU per converge; Median is theirs.
	Rounds []time.Duration `json:"rounds_ns"`
	Median time.Duration   `json:"median_ns"`
}

// measureConverges warms the bridge up with one converge of each converge
// node (their first runs: rollout events), then POSTs p.Converges converges
// cycling over them, p.ConvergeRounds times, and reports the bridge's CPU
// per converge in each round. perfOut, when set, records a profile.
func measureConverges(ctx context.Context, s *server, f *fixture, p params, perfOut string) (convergeCPU, error) {
	c := newConverger(s, f, p.ConvergeNodes)
	if err := c.postAll(ctx, p.ConvergeNodes, p.Clients); err != nil {
		return convergeCPU{}, fmt.Errorf("%s: warm-up: %w", s.name, err)
	}
	if perfOut != "" {
		rec, err := benchkit.StartPerf(s.proc.PID(), perfOut)
		if err != nil {
			return convergeCPU{}, err
		}
		defer rec.Stop()
	}
	var res convergeCPU
	var per []float64
	for range p.ConvergeRounds {
		before, err := s.cpu()
		if err != nil {
			return res, err
		}
		if err := c.postAll(ctx, p.Converges, p.Clients); err != nil {
			return res, fmt.Errorf("%s: %w", s.name, err)
		}
		after, err := s.cpu()
		if err != nil {
			return res, err
		}
		d := (after - before) / time.Duration(p.Converges)
		res.Rounds = append(res.Rounds, d)
		per = append(per, float64(d))
	}
	res.Median = time.Duration(benchkit.Median(per))
	return res, nil
}

// captureStatus POSTs node 0's converge to the bridge and returns the
// retained status the bridge published for it: the payload of the fleet.
func captureStatus(ctx context.Context, s *server, f *fixture) (statusTemplate, error) {
	c := newConverger(s, f, 1)
	if err := c.post(ctx, 0); err != nil {
		return statusTemplate{}, fmt.Errorf("%s: %w", s.name, err)
	}
	cl, err := mqttload.Dial(mqttload.Options{Addr: s.mqttAddr, ClientID: "bench-retained-capture", Username: s.user, Password: s.pass})
	if err != nil {
		return statusTemplate{}, err
	}
	got := make(chan []byte, 1)
	cl.OnPublish = func(_, payload []byte, _ byte, _ int64) {
		select {
		case got <- bytes.Clone(payload):
		default:
		}
	}
	cl.Start()
	defer cl.Close()
	if _, err := cl.Subscribe(statusTopic(f.org, 0), 0, 10*time.Second); err != nil {
		return statusTemplate{}, err
	}
	select {
	case payload := <-got:
		if !bytes.Contains(payload, []byte(nodeName(0))) || !bytes.Contains(payload, []byte(f.runID)) {
			return statusTemplate{}, fmt.Errorf("%s: the status %q names neither node %s nor run %s", s.name, payload, nodeName(0), f.runID)
		}
		return statusTemplate{payload: payload, org: f.org, runID: f.runID}, nil
	case <-time.After(10 * time.Second):
		return statusTemplate{}, fmt.Errorf("%s: no retained status on %s within 10s of a converge", s.name, statusTopic(f.org, 0))
	case <-ctx.Done():
		return statusTemplate{}, ctx.Err()
	}
}

// ratioOf is a / b, or -1 when b is not positive.
func ratioOf(a, b float64) float64 {
	if b <= 0 {
		return -1
	}
	return a / b
}

// fleetView asks the bridge's dashboard how many nodes its Fleet view has.
func fleetView(ctx context.Context, s *server) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.httpAddr+"/api/v1/fleet?limit=1", nil)
	if err != nil {
		return 0, err
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s: the dashboard's fleet: %w", s.name, err)
	}
	defer resp.Body.Close()
	var page struct {
		Total *int64 `json:"total"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&page); err != nil || resp.StatusCode != http.StatusOK || page.Total == nil {
		return 0, fmt.Errorf("%s: GET /api/v1/fleet: %s, %v (has the dashboard's API moved?)", s.name, resp.Status, err)
	}
	return *page.Total, nil
}
