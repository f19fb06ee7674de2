package clicore

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/opsfirehose/firehose/httpserver"
)

// healthCommand is `health`: ask a running bridge (or broker) on this
// machine whether it is alive (/healthz) or ready (/readyz), for Docker's
// HEALTHCHECK and other probes that have no curl, such as a distroless
// image. It finds the HTTP listener the way run does: --url, else the
// config's http.address with the same FIREHOSE_* overrides and flags.
func (p *Program) healthCommand() Command {
	return Command{Name: "health", Args: "[--ready] [--url URL] [--timeout D]", Summary: "exit 0 if the running process on this machine answers /healthz (or /readyz) with 200",
		Run: func(env Env, prog string, args []string) int {
			fs := NewFlagSet(env, prog, "health")
			s := p.configFlags(fs, env)
			ready := fs.Bool("ready", false, "ask /readyz (the broker up, every required sink connected) rather than /healthz (alive)")
			base := fs.String("url", "", "the HTTP listener's `URL`, e.g. https://127.0.0.1:8080 (default: from http.address)")
			timeout := fs.Duration("timeout", 5*time.Second, "give up after this `duration`")
			if code, ok := ParseFlags(fs, args); !ok {
				return code
			}
			u := *base
			if u == "" {
				// Only the address matters here: the secrets and certificates the
				// config names need not be readable by the probe.
				s.syntaxOnly = true
				cfg, ok := s.load(env, prog)
				if !ok {
					return ExitUsage
				}
				u = healthURL(cfg.HTTP)
			}
			path := "/healthz"
			if *ready {
				path = "/readyz"
			}
			ctx, cancel := context.WithTimeout(env.Context, *timeout)
			defer cancel()
			status, body, err := probe(ctx, strings.TrimSuffix(u, "/")+path)
			if err != nil {
				fmt.Fprintf(env.Stderr, "%s health: %v\n", prog, err)
				return ExitError
			}
			fmt.Fprintf(env.Stdout, "%s %d %s\n", u+path, status, strings.TrimSpace(body))
			if status != http.StatusOK {
				return ExitError
			}
			return ExitOK
		}}
}

// healthURL is the base URL of the HTTP listener hc describes, on this
// machine: a wildcard host is asked on loopback.
func healthURL(hc httpserver.Config) string {
	addr := hc.Address
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = addr, "80"
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	scheme := "http"
	if hc.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// probe GETs url. The certificate is not verified: the probe runs on the
// same machine, reads a status, and sends nothing secret, and the
// certificate is issued for the public name, not for 127.0.0.1.
func probe(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
		Proxy:           nil,
	}}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(body), nil
}
