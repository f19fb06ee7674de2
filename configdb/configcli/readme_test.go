package configcli

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/internal/dbtest"
)

// readmeSteps reads the use-case block of configdb/api/README.md: each
// command with the "#>" lines that follow it.
type readmeStep struct {
	line string
	want []string
}

func readmeSteps(t *testing.T) []readmeStep {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "api", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(b), "<!-- usecases:begin -->")
	block, _, ok2 := strings.Cut(block, "<!-- usecases:end -->")
	if !ok || !ok2 {
		t.Fatal("no use-case block in the README")
	}
	var steps []readmeStep
	for _, line := range strings.Split(block, "\n") {
		switch {
		case strings.HasPrefix(line, "#>"):
			if len(steps) == 0 {
				t.Fatalf("output before any command: %q", line)
			}
			last := &steps[len(steps)-1]
			last.want = append(last.want, strings.TrimPrefix(strings.TrimPrefix(line, "#>"), " "))
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "```"):
		default:
			steps = append(steps, readmeStep{line: line})
		}
	}
	return steps
}

// words splits a command line as sh would, for the quoting the README uses.
func words(line string) []string {
	var out []string
	var cur strings.Builder
	in := byte(0)
	started := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case in != 0 && c == in:
			in = 0
		case in != 0:
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			in, started = c, true
		case c == ' ':
			if started || cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
				started = false
			}
		default:
			cur.WriteByte(c)
		}
	}
	if started || cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// TestReadmeUseCases runs the README's use cases, as written, against a
// server on SQLite and on PostgreSQL.
func TestReadmeUseCases(t *testing.T) {
	steps := readmeSteps(t)
	if len(steps) < 10 {
		t.Fatalf("only %d steps found", len(steps))
	}
	const documented = "http://127.0.0.1:8080"
	dbtest.Each(t, func(t *testing.T, dsn string) {
		base := startAPI(t, dsn)
		c := &cli{t: t, env: map[string]string{}}
		for _, s := range steps {
			w := words(s.line)
			var got string
			switch {
			case w[0] == "export":
				k, v, _ := strings.Cut(w[1], "=")
				c.env[k] = strings.Replace(v, documented, base, 1)
				continue
			case w[0] == "curl":
				resp, err := http.Get(strings.Replace(w[len(w)-1], documented, base, 1))
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("%s: %s %s", s.line, resp.Status, b)
				}
				got = string(b)
			case w[0] == "bridge" && w[1] == "configdb":
				args, stdin := w[2:], ""
				if n := len(args); n >= 2 && args[n-2] == "<" {
					file, ok := strings.CutPrefix(args[n-1], "/etc/hiera/")
					if !ok {
						t.Fatalf("%s: stdin from outside /etc/hiera", s.line)
					}
					b, err := os.ReadFile(filepath.Join("testdata", "hiera", file))
					if err != nil {
						t.Fatal(err)
					}
					args, stdin = args[:n-2], string(b)
				}
				got = c.ok(stdin, args...)
			default:
				t.Fatalf("the README's use cases may only hold export, curl and bridge configdb lines: %q", s.line)
			}
			if s.want != nil && strings.TrimRight(got, "\n") != strings.Join(s.want, "\n") {
				t.Fatalf("%s\ngot:\n%s\nwant:\n%s", s.line, got, strings.Join(s.want, "\n"))
			}
		}
	})
}
