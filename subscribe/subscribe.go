// Package subscribe is `bridge sub`: the bus in a terminal. It subscribes to
// MQTT filters on a broker (anonymously unless given credentials) and prints
// one line per message: time, coloured topic, compact JSON; or pretty JSON,
// one JSON object per line for jq, or the raw payload.
//
// It only reads: it never publishes, and it keeps no session (clean session,
// a random client id), so it leaves nothing behind on the broker.
package subscribe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/mattn/go-isatty"

	"github.com/opsfirehose/firehose/internal/backoff"
	"github.com/opsfirehose/firehose/internal/tlsconfig"
	"github.com/opsfirehose/firehose/topics"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1 // the broker is unreachable or refused us
	ExitUsage = 2 // bad flags
)

// Environment variables that supply defaults for flags.
const (
	EnvURL      = "FIREHOSE_MQTT_URL"
	EnvUsername = "FIREHOSE_MQTT_USERNAME"
	EnvPassword = "FIREHOSE_MQTT_PASSWORD"
)

// DefaultURL is the bridge's default MQTT listener.
const DefaultURL = "tcp://127.0.0.1:1883"

// retainedQuiet is how long --retained-only waits for more retained messages
// after the last one (or after the subscription, when there are none): a
// broker sends them all right after SUBACK, with nothing to mark the end.
const retainedQuiet = 500 * time.Millisecond

type options struct {
	url, username, password, passwordFile, clientID string
	tls                                             tlsconfig.Client
	format, color                                   string
	count                                           int
	qos                                             int
	retainedOnly, noRetained                        bool
	connectTimeout                                  time.Duration
	filters                                         []string
	history                                         sinceOptions // --since: the history first (since.go)
}

// Run is `bridge sub [FILTER...] [flags]`; it returns the exit code. It ends
// when ctx is done (SIGINT/SIGTERM), after --count messages, or when the
// first connection fails; a connection that drops later is made again.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) int {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	o, code, ok := parse(args, stderr, lookupEnv)
	if !ok {
		return code
	}
	color := o.color == "always" || o.color == "auto" && isTerminal(stdout) && !hasEnv(lookupEnv, "NO_COLOR")
	p := printer{w: stdout, format: o.format, color: color}
	run := func(ctx context.Context, o options, p *printer) error { return follow(ctx, o, p, stderr) }
	if o.history.enabled() {
		run = runSince
	}
	if err := run(ctx, o, &p); err != nil {
		fmt.Fprintf(stderr, "bridge sub: %v\n", err)
		return ExitError
	}
	return ExitOK
}

func hasEnv(lookupEnv func(string) (string, bool), k string) bool {
	v, ok := lookupEnv(k)
	return ok && v != ""
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `bridge sub prints what an MQTT subscriber of the bus sees, one line per message.

Usage:
  bridge sub [FILTER...] [flags]      FILTER is an MQTT filter; none means '#'

Examples:
  bridge sub 'chef/+/+/run/failure'                      every failed Chef run
  bridge sub 'chef/+/+/status' --retained-only           every node's last run, then exit
  bridge sub 'ansible/#' --format json | jq .payload     one JSON object per message
  bridge sub --url mqtts://bus.example.org:8883 --ca-file ca.pem 'gerrit/#'
  bridge sub --since 12h 'chef/+/+/run/failure'           what failed overnight, then what fails now
  bridge sub --since 2026-11-27T22:00:00Z --until 1h 'ansible/#'   a window of the history, then exit

A connection that drops (a restart of the bridge) is made again, with
back-off, and the filters subscribed again; stderr says so.

Flags:
`)
	fs.SetOutput(w) // parse writes nowhere: its errors are ours
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

func parse(args []string, stderr io.Writer, lookupEnv func(string) (string, bool)) (options, int, bool) {
	env := func(k, def string) string {
		if v, ok := lookupEnv(k); ok && v != "" {
			return v
		}
		return def
	}
	var o options
	fs := flag.NewFlagSet("bridge sub", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.url, "url", env(EnvURL, DefaultURL), "broker `URL`: tcp://, mqtts:// (or ssl://), ws://, wss://; host:port means tcp ($"+EnvURL+")")
	fs.StringVar(&o.username, "username", env(EnvUsername, ""), "user `name`; none connects anonymously ($"+EnvUsername+")")
	fs.StringVar(&o.password, "password", env(EnvPassword, ""), "`password` (prefer --password-file; $"+EnvPassword+")")
	fs.StringVar(&o.passwordFile, "password-file", "", "read the password from `file`")
	fs.StringVar(&o.clientID, "client-id", "", "MQTT client `id` (default: a random one)")
	fs.StringVar(&o.tls.CAFile, "ca-file", "", "verify the broker with the CA certificates in `file` (default: the system's)")
	fs.StringVar(&o.tls.CertFile, "cert-file", "", "client certificate `file`, for brokers that ask for one")
	fs.StringVar(&o.tls.KeyFile, "key-file", "", "client key `file`")
	fs.StringVar(&o.tls.ServerName, "server-name", "", "`name` expected in the broker's certificate (default: the URL's host)")
	fs.BoolVar(&o.tls.InsecureSkipVerify, "insecure", false, "do not verify the broker's certificate")
	fs.StringVar(&o.format, "format", "line", "output: line (time, topic, compact JSON), pretty (indented JSON), json (one object per line, for jq) or raw (the payload)")
	fs.StringVar(&o.color, "color", "auto", "colour topics: auto (on a terminal, unless $NO_COLOR), always or never")
	fs.IntVar(&o.count, "count", 0, "exit after `N` messages (0: never)")
	fs.IntVar(&o.qos, "qos", 0, "subscription QoS: 0, 1 or 2")
	fs.BoolVar(&o.retainedOnly, "retained-only", false, "print only retained messages (last known values), and exit when they are done")
	fs.BoolVar(&o.noRetained, "no-retained", false, "skip retained messages: print only what is published from now on")
	fs.DurationVar(&o.connectTimeout, "connect-timeout", 10*time.Second, "give up connecting after this long")
	o.history.register(fs, env)
	// Filters and flags may come in any order: parse up to each filter, take it, go on.
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				usage(stderr, fs)
				return o, ExitOK, false
			}
			fmt.Fprintf(stderr, "bridge sub: %v\n(bridge sub --help lists the flags)\n", err)
			return o, ExitUsage, false
		}
		if fs.NArg() == 0 {
			break
		}
		o.filters = append(o.filters, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(o.filters) == 0 {
		o.filters = []string{"#"}
	}
	var problems []string
	for _, f := range o.filters {
		if err := topics.ValidFilter(f); err != nil {
			problems = append(problems, fmt.Sprintf("filter %q: %v", f, err))
		}
	}
	switch o.format {
	case "line", "pretty", "json", "raw":
	default:
		problems = append(problems, fmt.Sprintf("--format %q: use line, pretty, json or raw", o.format))
	}
	switch o.color {
	case "auto", "always", "never":
	default:
		problems = append(problems, fmt.Sprintf("--color %q: use auto, always or never", o.color))
	}
	if o.qos < 0 || o.qos > 2 {
		problems = append(problems, fmt.Sprintf("--qos %d: use 0, 1 or 2", o.qos))
	}
	if o.count < 0 {
		problems = append(problems, "--count must not be negative")
	}
	if o.retainedOnly && o.noRetained {
		problems = append(problems, "--retained-only and --no-retained exclude each other")
	}
	if o.passwordFile != "" {
		b, err := os.ReadFile(o.passwordFile)
		if err != nil {
			problems = append(problems, fmt.Sprintf("--password-file: %v", err))
		}
		o.password = strings.TrimRight(string(b), "\r\n")
	}
	if o.password != "" && o.username == "" {
		problems = append(problems, "a password needs --username")
	}
	if !strings.Contains(o.url, "://") {
		o.url = "tcp://" + o.url
	}
	u, err := url.Parse(o.url)
	if err != nil || u.Host == "" {
		problems = append(problems, fmt.Sprintf("--url %q: not a broker URL such as tcp://127.0.0.1:1883", o.url))
	} else {
		switch u.Scheme {
		case "mqtts", "tls":
			u.Scheme = "ssl"
			o.url = u.String()
		case "mqtt":
			u.Scheme = "tcp"
			o.url = u.String()
		case "tcp", "ssl", "ws", "wss":
		default:
			problems = append(problems, fmt.Sprintf("--url %q: the scheme must be tcp, mqtts (ssl), ws or wss", o.url))
		}
	}
	problems = append(problems, o.history.check(&o)...)
	if (o.tls.CertFile == "") != (o.tls.KeyFile == "") {
		problems = append(problems, "--cert-file and --key-file go together")
	}
	if len(problems) > 0 {
		fmt.Fprintf(stderr, "bridge sub: %s\n", strings.Join(problems, "\nbridge sub: "))
		return o, ExitUsage, false
	}
	return o, 0, true
}

type received struct {
	topic    string
	payload  []byte
	retained bool
	qos      byte
	at       time.Time
}

// The waits between attempts to reconnect after the connection dropped.
const (
	reconnectMin = 250 * time.Millisecond
	reconnectMax = 10 * time.Second
)

// errLost is a dropped connection, which follow answers by reconnecting.
type errLost struct{ err error }

func (e errLost) Error() string { return "lost the connection: " + e.err.Error() }

// follow connects, subscribes and prints until ctx ends or the flags say
// stop. A first connection that fails is an error (the broker is not
// there, or refuses us); once connected, a dropped connection is retried
// with back-off, saying so on stderr, and the filters are subscribed again,
// so a restart of the bridge costs the messages published while it was
// down and nothing else. --count counts across connections, and a retained
// message the broker sends again after a reconnect is printed again only if
// it changed, so --count and --retained-only mean what they mean on one
// connection.
func follow(ctx context.Context, o options, p *printer, stderr io.Writer) error {
	msgs := make(chan received, 4096)
	c, lost, err := connect(ctx, o, msgs)
	if c == nil || err != nil {
		return err
	}
	seen := &progress{retained: make(map[string]uint64)}
	wait := backoff.Backoff{Min: reconnectMin, Max: reconnectMax}
	for {
		err := seen.print(ctx, o, p, msgs, lost)
		c.Disconnect(250)
		var dropped errLost
		if !errors.As(err, &dropped) {
			return err
		}
		fmt.Fprintf(stderr, "bridge sub: lost the connection to %s: %v; reconnecting\n", o.url, dropped.err)
		for d := wait.Next(); ; d = wait.Next() {
			if !backoff.Sleep(ctx, d) {
				return nil
			}
			if c, lost, err = connect(ctx, o, msgs); c != nil && err == nil {
				break
			}
			if ctx.Err() != nil {
				return nil
			}
			fmt.Fprintf(stderr, "bridge sub: %v; trying again\n", err)
		}
		wait.Reset()
		fmt.Fprintf(stderr, "bridge sub: reconnected to %s and subscribed again\n", o.url)
	}
}

// connect makes one connection and subscribes it to the filters; messages
// go to msgs, and lost receives the error that ends the connection. It
// returns a nil client and no error when ctx ends first.
func connect(ctx context.Context, o options, msgs chan<- received) (paho.Client, <-chan error, error) {
	opts := paho.NewClientOptions().
		AddBroker(o.url).
		SetCleanSession(true).
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetConnectTimeout(o.connectTimeout).
		SetProtocolVersion(4).
		SetOrderMatters(true).
		SetUsername(o.username).
		SetPassword(o.password)
	if o.clientID != "" {
		opts.SetClientID(o.clientID)
	} else {
		opts.SetClientID(fmt.Sprintf("bridge-sub-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9))
	}
	if strings.HasPrefix(o.url, "ssl://") || strings.HasPrefix(o.url, "wss://") || o.tls != (tlsconfig.Client{}) {
		cfg, err := o.tls.Config()
		if err != nil {
			return nil, nil, err
		}
		opts.SetTLSConfig(cfg)
	}
	lost := make(chan error, 1)
	opts.SetConnectionLostHandler(func(_ paho.Client, err error) {
		select {
		case lost <- err:
		default:
		}
	})
	c := paho.NewClient(opts)
	tok := c.Connect()
	if !waitToken(ctx, tok, o.connectTimeout+time.Second) {
		if ctx.Err() != nil {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("cannot connect to %s: timed out after %v (is a broker listening there? --url sets another)", o.url, o.connectTimeout)
	}
	if err := tok.Error(); err != nil {
		return nil, nil, fmt.Errorf("cannot connect to %s: %w (%s)", o.url, err, hint(err, o))
	}
	c, err := subscribe(ctx, c, o, msgs)
	return c, lost, err
}

// subscribe subscribes a connected client to the filters, and disconnects it
// when that fails.
func subscribe(ctx context.Context, c paho.Client, o options, msgs chan<- received) (paho.Client, error) {
	handler := func(_ paho.Client, m paho.Message) {
		r := received{topic: m.Topic(), payload: m.Payload(), retained: m.Retained(), qos: m.Qos(), at: time.Now()}
		select {
		case msgs <- r:
		case <-ctx.Done():
		}
	}
	filters := make(map[string]byte, len(o.filters))
	for _, f := range o.filters {
		filters[f] = byte(o.qos)
	}
	st := c.SubscribeMultiple(filters, handler)
	var err error
	switch {
	case !waitToken(ctx, st, o.connectTimeout):
		if ctx.Err() != nil {
			c.Disconnect(0)
			return nil, nil
		}
		err = fmt.Errorf("subscribe at %s: no answer within %v", o.url, o.connectTimeout)
	case st.Error() != nil:
		err = fmt.Errorf("subscribe at %s: %w", o.url, st.Error())
	default:
		if sub, ok := st.(*paho.SubscribeToken); ok {
			for f, code := range sub.Result() {
				if code >= 0x80 {
					who := "anonymous clients"
					if o.username != "" {
						who = "user " + o.username
					}
					err = fmt.Errorf("the broker refused the subscription to %q (%s may not read it)", f, who)
				}
			}
		}
	}
	if err != nil {
		c.Disconnect(0)
		return nil, err
	}
	return c, nil
}

// progress is what has been printed, across connections.
type progress struct {
	n int // messages printed, for --count
	// retained holds a hash of the payload last printed for each topic
	// that came retained, so a reconnect's retained messages are printed
	// only if they changed.
	retained map[string]uint64
}

// print prints the messages of one connection until ctx ends (nil), the
// flags say stop (nil), or the connection drops (errLost).
func (s *progress) print(ctx context.Context, o options, p *printer, msgs <-chan received, lost <-chan error) error {
	var quiet <-chan time.Time
	if o.retainedOnly {
		quiet = time.After(retainedQuiet)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-lost:
			return errLost{err}
		case <-quiet:
			return nil
		case m := <-msgs:
			if o.noRetained && m.retained {
				continue
			}
			if o.retainedOnly {
				if !m.retained {
					return nil
				}
				quiet = time.After(retainedQuiet)
			}
			if !s.isNew(m) {
				continue
			}
			if err := p.print(m); err != nil {
				return fmt.Errorf("write: %w", err)
			}
			s.n++
			if o.count > 0 && s.n >= o.count {
				return nil
			}
		}
	}
}

// isNew reports whether m should be printed: anything but a retained
// message whose payload was printed last for its topic, which a reconnect's
// subscription brings again.
func (s *progress) isNew(m received) bool {
	h, tracked := s.retained[m.topic]
	if !m.retained && !tracked {
		return true
	}
	sum := fnv.New64a()
	sum.Write(m.payload)
	now := sum.Sum64()
	s.retained[m.topic] = now
	return !m.retained || !tracked || h != now
}

// waitToken waits for a paho token, ctx or the timeout; it reports whether
// the token completed.
func waitToken(ctx context.Context, tok paho.Token, timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-tok.Done():
		return true
	case <-ctx.Done():
	case <-t.C:
	}
	return false
}

// hint says what to try for a failed connection.
func hint(err error, o options) string {
	s := err.Error()
	switch {
	case strings.Contains(s, "connection refused"):
		return "is the bridge running? --url sets another broker"
	case strings.Contains(s, "not Authorized") || strings.Contains(s, "bad user name or password"):
		if o.username == "" {
			return "this broker does not let anonymous clients read: give --username and --password-file"
		}
		return "check --username and the password"
	case strings.Contains(s, "certificate"):
		return "give the broker's CA with --ca-file, or check --server-name"
	case strings.Contains(s, "no such host"):
		return "check the host in --url"
	}
	return "check --url"
}

// printer writes messages in the chosen format.
type printer struct {
	w      io.Writer
	format string
	color  bool
	buf    bytes.Buffer
}

// ANSI colours for a topic's first level, as the dashboard colours sources.
var sourceColors = map[string]string{
	"chef": "38;5;209", "ansible": "38;5;203", "configdb": "38;5;183", "gerrit": "38;5;117",
	"launchpad": "38;5;114", "gearman-subunit": "38;5;179", "$SYS": "38;5;245",
}

func (p *printer) topic(t string) string {
	if !p.color {
		return t
	}
	first, _, _ := strings.Cut(t, "/")
	c, ok := sourceColors[first]
	if !ok {
		c = "36"
	}
	if strings.HasSuffix(t, "/failure") || strings.HasSuffix(t, "/FAILED") || strings.HasSuffix(t, "/UNREACHABLE") {
		c = "1;31"
	}
	return "\x1b[" + c + "m" + t + "\x1b[0m"
}

func (p *printer) print(m received) error {
	b := &p.buf
	b.Reset()
	switch p.format {
	case "raw":
		b.Write(m.payload)
		b.WriteByte('\n')
	case "json":
		b.WriteString(`{"time":`)
		ts, _ := json.Marshal(m.at.UTC().Format(time.RFC3339Nano))
		b.Write(ts)
		t, _ := json.Marshal(m.topic)
		fmt.Fprintf(b, `,"topic":%s,"retained":%t,"qos":%d,`, t, m.retained, m.qos)
		mark := b.Len()
		b.WriteString(`"payload":`)
		if len(m.payload) == 0 || json.Compact(b, m.payload) != nil {
			b.Truncate(mark)
			if utf8.Valid(m.payload) {
				s, _ := json.Marshal(string(m.payload))
				b.WriteString(`"text":`)
				b.Write(s)
			} else {
				s, _ := json.Marshal(m.payload) // base64
				b.WriteString(`"base64":`)
				b.Write(s)
			}
		}
		b.WriteString("}\n")
	case "pretty":
		p.header(m)
		b.WriteByte('\n')
		if len(m.payload) > 0 && json.Indent(b, m.payload, "", "  ") == nil {
			b.WriteString("\n\n")
		} else {
			b.WriteString(printable(m.payload))
			b.WriteString("\n\n")
		}
	default: // line
		p.header(m)
		b.WriteByte(' ')
		if len(m.payload) == 0 || json.Compact(b, m.payload) != nil {
			b.WriteString(printable(m.payload))
		}
		b.WriteByte('\n')
	}
	_, err := p.w.Write(b.Bytes())
	return err
}

func (p *printer) header(m received) {
	p.buf.WriteString(m.at.Format("15:04:05.000"))
	p.buf.WriteByte(' ')
	p.buf.WriteString(p.topic(m.topic))
	if m.retained {
		if p.color {
			p.buf.WriteString(" \x1b[2m(retained)\x1b[0m")
		} else {
			p.buf.WriteString(" (retained)")
		}
	}
}

// printable shows a payload that is not JSON as text, with anything that
// would move the cursor or colour the terminal escaped.
func printable(b []byte) string {
	if len(b) == 0 {
		return "(empty)"
	}
	if !utf8.Valid(b) {
		return fmt.Sprintf("(%d bytes, not UTF-8)", len(b))
	}
	q := fmt.Sprintf("%q", b)
	return q[1 : len(q)-1]
}
