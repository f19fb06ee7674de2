package ingest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/opsfirehose/firehose/internal/cliflag"
)

// Exit codes, from sysexits(3) where an MTA reads them: sendmail and postfix
// retry a delivery later on EX_TEMPFAIL and bounce it on the others.
const (
	ExitOK       = 0
	ExitFailure  = 1  // the gerrit relay stopped with events it could not deliver
	ExitUsage    = 64 // EX_USAGE: bad flags
	ExitDataErr  = 65 // EX_DATAERR: the bridge refused the input as bad; retrying cannot help
	ExitTempFail = 75 // EX_TEMPFAIL: the bridge is unreachable, busy or misconfigured; retry later
)

// Environment variables that supply defaults for the flags.
const (
	EnvURL       = "FIREHOSE_URL"
	EnvToken     = "FIREHOSE_TOKEN"
	EnvTokenFile = "FIREHOSE_TOKEN_FILE"
)

// DefaultURL is the bridge's default HTTP listener.
const DefaultURL = "http://127.0.0.1:8080"

// Run is `bridge ingest <source> [flags]`: it relays a source that cannot
// post to the bridge itself, and returns the exit code. ctx ends the gerrit
// relay (SIGINT/SIGTERM).
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) int {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	env := env{stdin: stdin, stdout: stdout, stderr: stderr, lookupEnv: lookupEnv}
	if len(args) == 0 {
		usage(stderr)
		return ExitUsage
	}
	switch args[0] {
	case "gerrit":
		return runGerrit(ctx, args[1:], env)
	case "launchpad":
		return runLaunchpad(ctx, args[1:], env)
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return ExitOK
	default:
		fmt.Fprintf(stderr, "bridge ingest: unknown source %q\n\n", args[0])
		usage(stderr)
		return ExitUsage
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `bridge ingest relays sources that cannot post to the bridge themselves.

Usage:
  bridge ingest gerrit --exec 'ssh -p 29418 user@review gerrit stream-events' [flags]
      run the command, read Gerrit events (NDJSON) from its stdout and post them
      to /gerrit/v1/events; restart the command with backoff when it exits
  bridge ingest launchpad [flags] < mail
      post one Launchpad notification mail (stdin) to /launchpad/v1/events, for
      an MTA pipe: lpmqtt: "|bridge ingest launchpad --url ... --token-file ..."
      exit 0 delivered, 65 refused as bad (the MTA bounces it),
      75 bridge unreachable or busy (the MTA retries later), 64 bad flags

Common flags (defaults from $FIREHOSE_URL, $FIREHOSE_TOKEN, $FIREHOSE_TOKEN_FILE):
  --url URL          the bridge (default http://127.0.0.1:8080)
  --token TOKEN      sent as "Authorization: Bearer TOKEN"
  --token-file FILE  read the token from FILE (re-read after a 401/403)
  --cacert FILE      PEM CA certificates for an https URL signed by a private CA
  --timeout D        per request (default 30s)

Run "bridge ingest gerrit -h" for the relay's own flags.
`)
}

type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	lookupEnv      func(string) (string, bool)
}

func (e env) get(name string) string {
	v, _ := e.lookupEnv(name)
	return v
}

// clientFlags are the flags every source shares.
type clientFlags struct {
	url, token, tokenFile, caFile string
	timeout                       time.Duration
	// envToken and envTokenFile apply when neither flag is given. They are
	// not the flags' defaults, which -h would print.
	envToken, envTokenFile string
}

func (c *clientFlags) register(fs *flag.FlagSet, e env) {
	def := e.get(EnvURL)
	if def == "" {
		def = DefaultURL
	}
	fs.StringVar(&c.url, "url", def, "the bridge's `URL`; the source's path is added when it has none")
	c.envToken, c.envTokenFile = e.get(EnvToken), e.get(EnvTokenFile)
	fs.StringVar(&c.token, "token", "", "the intake `token`, sent as Authorization: Bearer (default $"+EnvToken+")")
	fs.StringVar(&c.tokenFile, "token-file", "", "read the token from `file`, one trailing newline removed (default $"+EnvTokenFile+")")
	fs.StringVar(&c.caFile, "cacert", "", "PEM `file` of CA certificates to trust for https")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "bound on each request")
}

// newClient checks the flags and builds the client for path.
func (c *clientFlags) newClient(path string) (*client, error) {
	if c.token != "" && c.tokenFile != "" {
		return nil, errors.New("give --token or --token-file, not both")
	}
	if c.token == "" && c.tokenFile == "" {
		c.token, c.tokenFile = c.envToken, c.envTokenFile
		if c.token != "" && c.tokenFile != "" {
			return nil, errors.New("set $" + EnvToken + " or $" + EnvTokenFile + ", not both")
		}
	}
	if c.timeout <= 0 {
		return nil, errors.New("--timeout must be positive")
	}
	endpoint, err := endpointURL(c.url, path)
	if err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if c.caFile != "" {
		pem, err := os.ReadFile(c.caFile)
		if err != nil {
			return nil, fmt.Errorf("--cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--cacert %s: no PEM certificate in it", c.caFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	cl := &client{
		http:     &http.Client{Transport: transport, Timeout: c.timeout},
		endpoint: endpoint,
		token:    c.token,
		file:     c.tokenFile,
	}
	if cl.file != "" {
		if err := cl.reloadToken(); err != nil {
			return nil, err
		}
	}
	return cl, nil
}

// endpointURL adds path to a base URL that has none, so that --url may name
// the bridge or the endpoint itself.
func endpointURL(base, path string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--url %q: want http(s)://host:port", base)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = path
	}
	return u.String(), nil
}

// client posts to one bridge endpoint.
type client struct {
	http     *http.Client
	endpoint string
	token    string
	file     string
}

// reloadToken reads --token-file again, so that a rotated token is picked
// up without a restart.
func (c *client) reloadToken() error {
	if c.file == "" {
		return nil
	}
	b, err := os.ReadFile(c.file)
	if err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	s := string(b)
	s = strings.TrimSuffix(s, "\n")
	c.token = strings.TrimSuffix(s, "\r")
	return nil
}

// answer is the bridge's answer to one post.
type answer struct {
	code int
	// retryAfter is the server's Retry-After, 0 when it sent none.
	retryAfter time.Duration
	// message is the JSON error body's "error" (and "field"), or the body.
	message string
	// topic is a 2xx answer's "topic", where the bridge names one.
	topic string
}

func (a answer) ok() bool { return a.code >= 200 && a.code < 300 }

// refused reports an answer that sending the same input again cannot change.
func (a answer) refused() bool {
	switch a.code {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

// post sends body. An error means no answer came (refused connection,
// timeout, TLS failure); any HTTP answer is returned as it is.
func (c *client) post(ctx context.Context, contentType string, body []byte) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", contentType)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	a := answer{code: resp.StatusCode, retryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	var e struct{ Error, Field, Topic string }
	_ = json.Unmarshal(raw, &e)
	a.topic = e.Topic
	if e.Error != "" {
		a.message = e.Error
		if e.Field != "" && !strings.HasPrefix(e.Error, e.Field+":") {
			a.message += " (field " + e.Field + ")"
		}
	} else {
		a.message = strings.TrimSpace(string(raw))
	}
	return a, nil
}

// retryAfter reads Retry-After: seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func newFlagSet(name string, e env) *flag.FlagSet {
	return cliflag.NewFlagSet("bridge ingest "+name, e.stderr)
}

// parse parses args, and reports whether to go on and, if not, the exit code.
func parse(fs *flag.FlagSet, args []string) (int, bool) { return cliflag.Parse(fs, args, ExitUsage) }
