// Command dashboard measures the live dashboard at scale, in Debian's
// headless Chromium against the bridge (cmd/bridge) run as its own process:
//
//   - load time: from navigation to the Fleet view showing all of 10,000
//     retained node statuses (the count drawn, and the first rows), against
//     the same page on a bridge holding 100 nodes, alternating;
//   - CPU: the bridge's CPU (from /proc) while an MQTT publisher sends
//     1,000 msgs/s (Chef statuses, Ansible task results, Gerrit events), with
//     no page open (the baseline), 5 pages on the Fleet view, and 5 pages on
//     the Stream view watching '#' (every message, with its payload).
//
// It prints medians over alternating rounds and ratios against the baselines
// measured in the same run, so that a shared machine's noise cancels out.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/chromedp/chromedp"
	paho "github.com/eclipse/paho.mqtt.golang"
	"golang.org/x/crypto/bcrypt"

	"github.com/opsfirehose/firehose/bench/internal/benchkit"
	"github.com/opsfirehose/firehose/dashboard/dashboardtest"
	"github.com/opsfirehose/firehose/topics"
)

type params struct {
	Nodes, BaseNodes int
	Rate             int
	Pages            int
	Window           time.Duration
	LoadRounds       int
	CPURounds        int
}

func main() {
	p := params{}
	flag.IntVar(&p.Nodes, "nodes", 10000, "retained node statuses on the measured bridge")
	flag.IntVar(&p.BaseNodes, "base-nodes", 100, "node statuses on the baseline bridge of the load-time measure")
	flag.IntVar(&p.Rate, "rate", 1000, "messages per second published during the CPU measure")
	flag.IntVar(&p.Pages, "pages", 5, "pages open during the CPU measure")
	flag.DurationVar(&p.Window, "window", 15*time.Second, "CPU measurement window")
	flag.IntVar(&p.LoadRounds, "load-rounds", 5, "page loads per bridge (alternating)")
	flag.IntVar(&p.CPURounds, "cpu-rounds", 3, "rounds of the three CPU conditions (alternating)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if err := run(ctx, p, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench/dashboard:", err)
		os.Exit(1)
	}
}

// bridge is one cmd/bridge process with a publisher account "bench".
type bridge struct {
	proc      *benchkit.Proc
	http, mqt string
}

func startBridge(ctx context.Context, bin, dir, name string) (*bridge, error) {
	addrs, err := benchkit.FreeAddrs(2)
	if err != nil {
		return nil, err
	}
	httpAddr, mqttAddr := addrs[0], addrs[1]
	hash, err := bcrypt.GenerateFromPassword([]byte("bench"), bcrypt.MinCost)
	if err != nil {
		return nil, err
	}
	wd := filepath.Join(dir, name)
	if err := os.MkdirAll(wd, 0o755); err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`log: {level: warn}
http: {address: %q}
data_dir: data
broker:
  listeners: [{name: mqtt, type: tcp, address: %q}]
  users: [{username: bench, password_hash: %q, publish: ["#"]}]
`, httpAddr, mqttAddr, hash)
	if err := os.WriteFile(filepath.Join(wd, "config.yaml"), []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	proc, err := benchkit.Start(name, wd, nil, bin, "--config", "config.yaml")
	if err != nil {
		return nil, err
	}
	b := &bridge{proc: proc, http: "http://" + httpAddr, mqt: "tcp://" + mqttAddr}
	err = benchkit.PollUntil(ctx, time.Now().Add(time.Minute), 50*time.Millisecond, proc, func() (bool, error) {
		resp, err := http.Get(b.http + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		_ = proc.Stop()
		return nil, err
	}
	return b, nil
}

func (b *bridge) publisher() (paho.Client, error) {
	c := paho.NewClient(paho.NewClientOptions().AddBroker(b.mqt).SetClientID(fmt.Sprintf("bench-%d", rand.Uint32())).
		SetUsername("bench").SetPassword("bench").SetAutoReconnect(false).SetMaxResumePubInFlight(1000))
	tok := c.Connect()
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return nil, fmt.Errorf("connect %s: %v", b.mqt, tok.Error())
	}
	return c, nil
}

// fill publishes n retained statuses and waits until the fleet snapshot holds them.
func (b *bridge) fill(ctx context.Context, n int) error {
	c, err := b.publisher()
	if err != nil {
		return err
	}
	defer c.Disconnect(100)
	var last paho.Token
	for _, m := range dashboardtest.Statuses(n, 42, 15, time.Now()) {
		last = c.Publish(m.Topic, 1, true, m.Payload)
	}
	if last != nil && (!last.WaitTimeout(time.Minute) || last.Error() != nil) {
		return fmt.Errorf("publish statuses: %v", last.Error())
	}
	return benchkit.PollUntil(ctx, time.Now().Add(time.Minute), 100*time.Millisecond, b.proc, func() (bool, error) {
		var f struct{ Total int }
		if err := getJSON(b.http+"/api/v1/fleet?limit=1", &f); err != nil {
			return false, nil
		}
		return f.Total == n, nil
	})
}

func getJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

func run(ctx context.Context, p params, out io.Writer) error {
	dir, err := os.MkdirTemp("", "firehose-bench-dashboard-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "bridge")
	fmt.Fprintln(out, "building cmd/bridge")
	if err := benchkit.Build(ctx, "./cmd/bridge", bin); err != nil {
		return err
	}
	big, err := startBridge(ctx, bin, dir, "bridge-big")
	if err != nil {
		return err
	}
	defer big.proc.Stop()
	small, err := startBridge(ctx, bin, dir, "bridge-small")
	if err != nil {
		return err
	}
	defer small.proc.Stop()
	fmt.Fprintf(out, "publishing %d and %d retained node statuses\n", p.Nodes, p.BaseNodes)
	if err := big.fill(ctx, p.Nodes); err != nil {
		return err
	}
	if err := small.fill(ctx, p.BaseNodes); err != nil {
		return err
	}
	browser, closeBrowser, err := dashboardtest.Browser(ctx, filepath.Join(dir, "chromium"), 1440, 900)
	if err != nil {
		return err
	}
	defer closeBrowser()

	// Load time, alternating the two bridges, each in a tab of its own (a
	// tab that stays on one origin: chromedp's polls can lose track of a
	// tab's page when it changes origin).
	loadTabs, err := newTabs(browser, 1)
	if err != nil {
		return err
	}
	var bigMs, smallMs []float64
	for r := 0; r < p.LoadRounds; r++ {
		for _, c := range []struct {
			b    *bridge
			n    int
			tab  context.Context
			into *[]float64
		}{{big, p.Nodes, browser, &bigMs}, {small, p.BaseNodes, loadTabs[0], &smallMs}} {
			ms, err := loadTime(c.tab, c.b.http, c.n, r)
			if err != nil {
				return err
			}
			*c.into = append(*c.into, ms)
			fmt.Fprintf(out, "  round %d: %5d nodes shown after %6.0f ms\n", r+1, c.n, ms)
		}
	}

	// CPU at p.Rate msgs/s, alternating the three conditions.
	pages, err := newTabs(browser, p.Pages)
	if err != nil {
		return err
	}
	conds := []string{"no page", fmt.Sprintf("%d pages on Fleet", p.Pages), fmt.Sprintf("%d pages on Stream '#'", p.Pages)}
	cpu := make([][]float64, len(conds))
	sent := make([][]float64, len(conds))
	for r := 0; r < p.CPURounds; r++ {
		for i, name := range conds {
			view := map[int]string{0: "", 1: "fleet", 2: "stream"}[i]
			for _, v := range []string{"", view} { // every old stream closed before new ones open
				for _, tab := range pages {
					if err := show(tab, big.http, v); err != nil {
						return fmt.Errorf("open %q: %w", v, err)
					}
				}
			}
			use, rate, other, err := measureCPU(ctx, big, p)
			got := ""
			if i == 2 && err == nil { // proof that the Stream pages took the load
				n, _ := chromedp.Run(pages[0], chromedp.Evaluate[string](`document.getElementById("stream-count").textContent`))
				got = fmt.Sprintf("; a page received %s", n)
			}
			if err != nil {
				return err
			}
			cpu[i] = append(cpu[i], use)
			sent[i] = append(sent[i], rate)
			fmt.Fprintf(out, "  round %d: %-24s bridge CPU %5.1f%% of a core at %5.0f msgs/s (other load on the machine: %.0f%%)%s\n", r+1, name, use, rate, other, got)
		}
	}
	var h struct{ Dashboard struct{ Dropped float64 } }
	_ = getJSON(big.http+"/api/v1/health", &h)

	fmt.Fprintf(out, "\nFleet view, time until all nodes are shown (median of %d loads, Chromium %s):\n", p.LoadRounds, "headless")
	mb, ms := benchkit.Median(bigMs), benchkit.Median(smallMs)
	fmt.Fprintf(out, "  %6d nodes: %6.0f ms\n  %6d nodes: %6.0f ms (baseline)\n  ratio: %.2fx\n", p.Nodes, mb, p.BaseNodes, ms, mb/ms)
	fmt.Fprintf(out, "\nBridge CPU at %d msgs/s, %% of one core (median of %d rounds):\n", p.Rate, p.CPURounds)
	base := benchkit.Median(cpu[0])
	for i, name := range conds {
		m := benchkit.Median(cpu[i])
		fmt.Fprintf(out, "  %-24s %5.1f%%  (%.2fx the baseline; %.0f msgs/s sent)\n", name, m, m/base, benchkit.Median(sent[i]))
	}
	fmt.Fprintf(out, "  messages the dashboard dropped for slow pages: %.0f\n", h.Dashboard.Dropped)
	return nil
}

// loadTime loads the Fleet view afresh in tab and returns the page's own
// time (performance.now(), from navigation start) until the count shows n
// and the first rows are drawn.
func loadTime(tab context.Context, base string, n, round int) (float64, error) {
	ctx, stop := context.WithTimeout(tab, time.Minute)
	defer stop()
	want := fmt.Sprintf("%q", groupDigits(n)) // as the page writes it: 10,000
	// A new query string makes it a full load, not a move within the page.
	if err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("%s/?load=%d#fleet", base, round))); err != nil {
		return 0, err
	}
	return chromedp.Run(ctx, chromedp.Poll[float64](
		fmt.Sprintf(`document.getElementById("fleet-total").textContent === %s && document.querySelectorAll(".frow").length > 0 && performance.now()`, want),
		chromedp.WithPollingInterval(5*time.Millisecond), chromedp.WithPollingTimeout(time.Minute)))
}

func groupDigits(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// newTabs opens n tabs, once: Chromium may stop answering the creation of
// windows after many have come and gone, so the rounds reuse them.
func newTabs(browser context.Context, n int) ([]context.Context, error) {
	var tabs []context.Context
	for range n {
		tab, _ := chromedp.NewContext(browser) // closed with the browser
		if err := chromedp.Do(tab); err != nil {
			return nil, err
		}
		tabs = append(tabs, tab)
	}
	return tabs, nil
}

// show loads view in tab ("" for a blank page) and, for a view, waits until
// its live stream is open.
func show(tab context.Context, base, view string) error {
	ctx, stop := context.WithTimeout(tab, time.Minute)
	defer stop()
	if view == "" {
		return chromedp.Do(ctx, chromedp.Navigate("about:blank"))
	}
	return chromedp.Do(ctx, chromedp.Navigate(base+"/#"+view), chromedp.WaitVisible(`#conn[data-state="live"]`))
}

// measureCPU publishes p.Rate msgs/s (3 in 10 Chef statuses, 5 Ansible
// task results, 2 Gerrit events) for a warm-up second, then measures the
// bridge's CPU over p.Window. It returns the CPU (% of a core), the rate
// achieved and the rest of the machine's load.
func measureCPU(ctx context.Context, b *bridge, p params) (float64, float64, float64, error) {
	c, err := b.publisher()
	if err != nil {
		return 0, 0, 0, err
	}
	defer c.Disconnect(100)
	nodes := dashboardtest.Fleet(p.Nodes, 42)
	r := rand.New(rand.NewPCG(1, 2))
	gerrit := []byte(`{"type":"comment-added","change":{"project":"openstack/nova","number":"12345","subject":"Fix race in the scheduler's host cache"},"author":{"name":"Zuul"},"comment":"Build succeeded."}`)
	task := func(i int) (string, []byte) {
		play := fmt.Sprintf("bench-play-%02d", i%20)
		host := fmt.Sprintf("web-%03d", i%200)
		status := "OK"
		if i%50 == 0 {
			status = "FAILED"
		}
		t, _ := topics.Ansible{}.Task(play, host, status)
		body, _ := json.Marshal(map[string]any{"status": status, "host": "ctl01", "ansible_host": host, "session": "s", "ansible_type": "task",
			"playbook_name": "bench " + play, "playbook_id": play, "ansible_task": "TASK: step", "ansible_result": map[string]any{"changed": i%3 == 0, "msg": "ok"}})
		return t, body
	}
	stop := make(chan struct{})
	counted := make(chan int, 1)
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		t0, n := time.Now(), 0
		for {
			select {
			case <-stop:
				counted <- n
				return
			case <-tick.C:
			}
			// Catch up with the schedule, so that a late tick does not lower the rate.
			for due := int(time.Since(t0).Seconds() * float64(p.Rate)); n < due; n++ {
				switch n % 10 {
				case 0, 3, 6:
					m := dashboardtest.Status(nodes[r.IntN(len(nodes))], time.Now(), r.IntN(15) == 0, r)
					c.Publish(m.Topic, 1, true, m.Payload)
				case 1, 4:
					c.Publish("gerrit/openstack/nova/comment-added", 1, false, gerrit)
				default:
					t, body := task(n)
					c.Publish(t, 1, false, body)
				}
			}
		}
	}()
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
	}
	w := benchkit.StartCPUWindow(b.proc.PID())
	start := time.Now()
	select {
	case <-time.After(p.Window):
	case <-ctx.Done():
	}
	elapsed := time.Since(start)
	use := w.End(elapsed)
	close(stop)
	n := <-counted
	if err := b.proc.Alive(); err != nil {
		return 0, 0, 0, err
	}
	return use.Proc, float64(n) / (elapsed + time.Second).Seconds(), use.Other, ctx.Err()
}
