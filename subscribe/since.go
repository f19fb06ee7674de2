package subscribe

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/opsfirehose/firehose/history"
)

// EnvHTTPURL supplies --http-url's default.
const EnvHTTPURL = "FIREHOSE_HTTP_URL"

// DefaultHTTPURL is the bridge's default HTTP listener.
const DefaultHTTPURL = "http://127.0.0.1:8080"

// historyLimit is the most messages one --since replays; the bridge's API
// allows as many.
const historyLimit = 1_000_000

// sinceOptions are the flags of `bridge sub --since`, which reads the bus's
// history from the bridge's HTTP API (GET /api/v1/history), which then goes
// on live with no gap and no duplicate, instead of subscribing over MQTT.
type sinceOptions struct {
	since, until, httpURL string
}

func (s *sinceOptions) register(fs *flag.FlagSet, env func(k, def string) string) {
	fs.StringVar(&s.since, "since", "", "print the history from `T` first, then go on live: a duration back (90m, 2h, 3d) or an RFC 3339 time (read from the bridge's HTTP API, --http-url)")
	fs.StringVar(&s.until, "until", "", "with --since, stop at `T` (a duration back or an RFC 3339 time) instead of going on live")
	fs.StringVar(&s.httpURL, "http-url", env(EnvHTTPURL, DefaultHTTPURL), "the bridge's HTTP `URL`, where --since reads the history ($"+EnvHTTPURL+")")
}

// enabled reports whether the history is asked for.
func (s *sinceOptions) enabled() bool { return s.since != "" || s.until != "" }

// check lists what is wrong with the flags.
func (s *sinceOptions) check(o *options) []string {
	if !s.enabled() {
		return nil
	}
	var problems []string
	now := time.Now()
	if s.since == "" {
		problems = append(problems, "--until needs --since")
	}
	for _, f := range []struct{ name, v string }{{"--since", s.since}, {"--until", s.until}} {
		if f.v == "" {
			continue
		}
		if _, err := history.ParseTime(f.v, now); err != nil {
			problems = append(problems, fmt.Sprintf("%s %v", f.name, err))
		}
	}
	if o.retainedOnly || o.noRetained {
		problems = append(problems, "--since replays the history, which has no retained flag: leave out --retained-only and --no-retained")
	}
	if u, err := url.Parse(s.httpURL); err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" {
		problems = append(problems, fmt.Sprintf("--http-url %q: not the bridge's HTTP URL, such as %s", s.httpURL, DefaultHTTPURL))
	}
	return problems
}

// historyLine is one line of the history API's JSON lines.
type historyLine struct {
	Time    time.Time       `json:"time"`
	Topic   string          `json:"topic"`
	Payload json.RawMessage `json:"payload"`
	Text    *string         `json:"text"`
	Base64  []byte          `json:"base64"`
	// The last line may say why the stream ended instead.
	Error     string `json:"error"`
	Truncated bool   `json:"truncated"`
	Replayed  int    `json:"replayed"`
}

// runSince prints the history since --since, then, without --until, what
// comes live, as run prints what MQTT brings.
func runSince(ctx context.Context, o options, p *printer) error {
	q := url.Values{"filter": o.filters, "since": {o.history.since}, "limit": {fmt.Sprint(historyLimit)}}
	if o.history.until != "" {
		q.Set("until", o.history.until)
	} else {
		q.Set("follow", "1")
	}
	endpoint := strings.TrimSuffix(o.history.httpURL, "/") + "/api/v1/history?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return err
	}
	if o.username != "" {
		req.SetBasicAuth(o.username, o.password)
	}
	transport := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: o.connectTimeout}).DialContext,
		TLSHandshakeTimeout: o.connectTimeout,
	}
	if strings.HasPrefix(o.history.httpURL, "https://") {
		if transport.TLSClientConfig, err = o.tls.Config(); err != nil {
			return err
		}
	}
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("cannot read the history at %s: %w (is the bridge running? --http-url sets another)", o.history.httpURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(body))
		}
		return fmt.Errorf("the bridge answered %s: %s", resp.Status, e.Error)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 300<<20) // a message of the bridge's largest, as JSON
	n := 0
	for sc.Scan() {
		var l historyLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return fmt.Errorf("the history API sent a line that is not JSON: %w", err)
		}
		switch {
		case l.Error != "":
			return fmt.Errorf("the history stream ended: %s", l.Error)
		case l.Truncated:
			return fmt.Errorf("more than %d messages match: give a later --since or narrower filters", l.Replayed)
		}
		m := received{topic: l.Topic, payload: l.Payload, at: l.Time.Local()}
		switch {
		case l.Text != nil:
			m.payload = []byte(*l.Text)
		case l.Base64 != nil:
			m.payload = l.Base64
		}
		if err := p.print(m); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		n++
		if o.count > 0 && n >= o.count {
			return nil
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("the history stream broke: %w", err)
	}
	if o.history.until == "" {
		return fmt.Errorf("the bridge at %s ended the history stream (shutting down?)", o.history.httpURL)
	}
	return nil
}
