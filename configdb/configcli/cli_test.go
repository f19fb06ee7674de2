package configcli

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"

	"github.com/opsfirehose/firehose/adapters/intake"
	api "github.com/opsfirehose/firehose/configdb/api"
	"github.com/opsfirehose/firehose/internal/dbtest"
	"github.com/opsfirehose/firehose/internal/testbus"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// startAPI serves the real ConfigDB handler on real storage, publishing to a
// real broker, and returns the bridge's base URL (without /api/v1/config).
func startAPI(t *testing.T, dsn string, cfgs ...func(*api.Config)) string {
	t.Helper()
	cfg := api.DefaultConfig()
	cfg.DSN = dsn
	for _, f := range cfgs {
		f(&cfg)
	}
	h, err := api.Open(context.Background(), cfg, api.Options{Options: intake.Options{Publisher: testbus.Start(t), Logger: zerolog.Nop()}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.Close(); _ = h.Close(context.Background()) })
	return srv.URL
}

// cli runs commands against one server.
type cli struct {
	t   *testing.T
	env map[string]string
}

func newCLI(t *testing.T, base string) *cli {
	return &cli{t: t, env: map[string]string{EnvURL: base + "/api/v1/config"}}
}

func (c *cli) lookup(k string) (string, bool) { v, ok := c.env[k]; return v, ok }

// run returns the exit code, stdout and stderr.
func (c *cli) run(stdin string, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := Run(context.Background(), args, strings.NewReader(stdin), &out, &errOut, c.lookup)
	return code, out.String(), errOut.String()
}

// ok runs a command that must succeed and returns its output.
func (c *cli) ok(stdin string, args ...string) string {
	c.t.Helper()
	code, out, errOut := c.run(stdin, args...)
	if code != 0 {
		c.t.Fatalf("%v: exit %d: %s", args, code, errOut)
	}
	return out
}

func (c *cli) fails(wantCode int, wantMsg string, args ...string) {
	c.t.Helper()
	code, _, errOut := c.run("", args...)
	if code != wantCode || !strings.Contains(errOut, wantMsg) {
		c.t.Fatalf("%v: exit %d %q; want %d with %q", args, code, errOut, wantCode, wantMsg)
	}
}

func (c *cli) setup() {
	c.ok("", "comp", "create", "--name", "fuel", "--resource-definitions", "astute,override/plugins")
	c.ok("", "env", "create", "--id", "1", "--components", "fuel", "--levels", "nodes")
}

func TestSetAndGetForms(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dsn string) {
		c := newCLI(t, startAPI(t, dsn))
		c.setup()
		node := []string{"--env", "1", "--level", "nodes=n1", "--resource", "astute"}
		args := func(cmd string, more ...string) []string { return append(append([]string{cmd}, node...), more...) }

		// A key on a level where nothing is stored yet: created.
		if got := c.ok("", args("set", "--key", "i", "--value", "42", "--type", "int")...); got != "ResourceValue for key i was set\n" {
			t.Fatalf("%q", got)
		}
		c.ok("", args("set", "--key", "s", "--value", "42", "--type", "str")...)
		c.ok("", args("set", "--key", "b", "--value", "true", "--type", "bool")...)
		c.ok("", args("set", "--key", "n", "--type", "null")...)
		c.ok("", args("set", "--key", "j", "--value", `{"x": [1, 2]}`, "--type", "json")...)
		c.ok("", args("set", "--key", "y", "--value", "a: [1, b]", "--type", "yaml")...)
		c.ok("list:\n  - 1\n  - two\n", args("set", "--key", "stdin", "--format", "yaml")...)
		c.ok("", args("set", "--key", "j.x.1", "--value", "3", "--type", "int")...) // nested
		if got := c.ok("", args("get")...); got != "{\n  \"b\": true,\n  \"i\": 42,\n  \"j\": {\n    \"x\": [\n      1,\n      3\n    ]\n  },\n  \"n\": null,\n  \"s\": \"42\",\n  \"stdin\": {\n    \"list\": [\n      1,\n      \"two\"\n    ]\n  },\n  \"y\": {\n    \"a\": [\n      1,\n      \"b\"\n    ]\n  }\n}\n" {
			t.Fatalf("%s", got)
		}
		if got := c.ok("", args("get", "--key", "s", "--format", "plain")...); got != "42\n" {
			t.Fatalf("%q", got)
		}
		if got := c.ok("", args("get", "--key", "n", "--format", "plain")...); got != "" {
			t.Fatalf("%q", got)
		}
		// --key prints "<key>: <value>" (spec 002, fuel2), the value keeping its type.
		if got := c.ok("", args("get", "--key", "j", "--format", "yaml")...); got != "j:\n  x:\n    - 1\n    - 3\n" {
			t.Fatalf("%q", got)
		}
		if got := c.ok("", args("get", "--key", "i", "--format", "yaml")...); got != "i: 42\n" {
			t.Fatalf("%q", got)
		}
		if got := c.ok("", args("get", "--key", "s")...); got != "{\n  \"s\": \"42\"\n}\n" {
			t.Fatalf("%q", got)
		}
		if got := c.ok("", args("get", "--key", "j.x.1", "--format", "table")...); got != "key    value\nj.x.1  3\n" {
			t.Fatalf("%q", got)
		}

		// The whole document from stdin; then overrides, del, rm-override.
		if got := c.ok(`{"a": 1, "b": 2}`, args("set", "--format", "json")...); got != "ResourceValue was set\n" {
			t.Fatalf("%q", got)
		}
		c.ok("", args("override", "--key", "a", "--value", "10", "--type", "int")...)
		if got := c.ok("", args("get", "--key", "a", "--show-lookup", "--format", "json")...); got != "{\n  \"a\": [\n    10,\n    \"/nodes/n1/\"\n  ]\n}\n" {
			t.Fatalf("%q", got)
		}
		// Writes say what they did, in fuel2's words.
		if got := c.ok("", args("rm-override", "--key", "a")...); got != "ResourceOverride for key a was deleted\n" {
			t.Fatalf("%q", got)
		}
		if got := c.ok("", args("del", "--key", "b")...); got != "ResourceValue for key b was deleted\n" {
			t.Fatalf("%q", got)
		}

		if got := c.ok("", args("get", "--format", "json")...); got != "{\n  \"a\": 1\n}\n" {
			t.Fatalf("%q", got)
		}
		hist := c.ok("", args("history", "--kind", "overrides", "--format", "yaml")...)
		if strings.Count(hist, "- author: anonymous") != 2 || !strings.Contains(hist, "kind: overrides") {
			t.Fatal(hist)
		}
		if got := c.ok("", args("override", "--key", "z", "--value", "1")...); got != "ResourceOverride for key z was set\n" {
			t.Fatalf("%q", got)
		}

		// Errors: the server's message and exit 1; bad arguments exit 2.
		c.fails(1, "409 Conflict: keys path", args("del", "--key", "nope")...)
		c.fails(1, "404 Not Found: environment not found by identifier: 2", "get", "--env", "2", "--resource", "astute")
		c.fails(1, "Unexpected level name 'rack'. Expected 'nodes'.", "get", "--env", "1", "--level", "rack=r1", "--resource", "astute")
		c.fails(1, "keys path", args("set", "--key", "missing.deeper", "--value", "1", "--type", "int")...)
		c.fails(2, "--env is required", "get", "--resource", "astute")
		c.fails(2, "--level must be", args("get", "--level", "nodes")...)
		c.fails(2, "not an int", args("set", "--key", "a", "--value", "x", "--type", "int")...)
		c.fails(2, "--type null takes no --value", args("set", "--key", "a", "--value", "x", "--type", "null")...)
		c.fails(2, "--value and --type make sense only with --key", args("set", "--value", "1", "--type", "int")...)
		c.fails(2, "give --format", args("set")...)
		c.fails(2, "bad value for bool", args("set", "--key", "a", "--value", "maybe", "--type", "bool")...)
		c.fails(2, "--format must be", args("get", "--format", "xml")...)
		c.fails(2, "unknown command", "frobnicate")
		c.fails(2, "--key is required", args("del")...)
		c.fails(2, "flag provided but not defined", args("get", "--nope")...)
	})
}

// TestValueWithoutType: --value without --type is a string, so the spec's
// use case 3, fuel2 config override ... --key deployment_id --value 2, works
// as written; --type int makes it a number.
func TestValueWithoutType(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dsn string) {
		c := newCLI(t, startAPI(t, dsn))
		c.setup()
		node := []string{"--env", "1", "--level", "nodes=node-1.domain.tld", "--resource", "astute"}
		args := func(cmd string, more ...string) []string { return append(append([]string{cmd}, node...), more...) }
		c.ok("", args("set", "--key", "deployment_id", "--value", "1", "--type", "int")...)
		c.ok("", args("override", "--key", "deployment_id", "--value", "2")...)
		if got := c.ok("", args("get", "--key", "deployment_id")...); got != "{\n  \"deployment_id\": \"2\"\n}\n" {
			t.Fatalf("%q, want the string \"2\"", got)
		}
		c.ok("", args("override", "--key", "deployment_id", "--value", "3", "--type", "int")...)
		if got := c.ok("", args("get", "--key", "deployment_id", "--format", "yaml")...); got != "deployment_id: 3\n" {
			t.Fatalf("%q, want the number 3", got)
		}
		// Nested keys and the environment-wide level too.
		c.ok("", "set", "--env", "1", "--resource", "astute", "--key", "a", "--value", "x y")
		if got := c.ok("", "get", "--env", "1", "--resource", "astute", "--key", "a", "--format", "plain"); got != "x y\n" {
			t.Fatalf("%q", got)
		}
		// --type alone still needs --value, but for null.
		c.fails(2, "--type is for --value", args("set", "--key", "a", "--type", "str")...)
		c.fails(2, "--format is for stdin", args("set", "--key", "a", "--value", "1", "--format", "json")...)
		if _, out, _ := c.run("", "help"); !strings.Contains(out, "--value without --type is a string") {
			t.Fatalf("help does not say what --value without --type is:\n%s", out)
		}
	})
}

func TestEntities(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dsn string) {
		c := newCLI(t, startAPI(t, dsn))
		if got := c.ok("", "comp", "create", "--name", "fuel", "--resource-definitions", "astute"); !strings.Contains(got, `"name": "astute"`) {
			t.Fatal(got)
		}
		if got := c.ok("", "def", "create", "--name", "globals", "--component-id", "1", "--content", `{"k": "v"}`, "--type", "json"); !strings.Contains(got, `"id": 2`) {
			t.Fatal(got)
		}
		c.ok("k: w\n", "def", "update", "2", "--data-format", "yaml")
		if got := c.ok("", "def", "show", "2", "--format", "yaml"); got != "component_id: 1\ncontent:\n  k: w\nid: 2\nname: globals\n" {
			t.Fatalf("%q", got)
		}
		if got := c.ok("", "def", "list", "--component-id", "1", "--format", "json"); strings.Count(got, `"id"`) != 2 {
			t.Fatal(got)
		}
		c.ok("", "def", "create", "--name", "free")
		if got := c.ok("", "def", "list", "--component-id", ""); strings.Count(got, `"id"`) != 1 {
			t.Fatal(got)
		}
		c.ok("", "comp", "update", "1", "--name", "fuel9", "--resource-definitions", "1")
		if got := c.ok("", "comp", "show", "1"); !strings.Contains(got, "fuel9") || strings.Contains(got, "globals") {
			t.Fatal(got)
		}
		c.fails(1, "404", "def", "show", "2") // dropped from the component: deleted

		if got := c.ok("", "env", "create", "--components", "fuel9", "--levels", "rack,nodes"); !strings.Contains(got, `"id": 1`) {
			t.Fatal(got)
		}
		c.ok("", "env", "update", "1", "--levels", "nodes")
		if got := c.ok("", "env", "show", "1", "--format", "yaml"); got != "components:\n  - 1\nhierarchy_levels:\n  - nodes\nid: 1\n" {
			t.Fatalf("%q", got)
		}
		c.ok("", "set", "--env", "1", "--level", "nodes=n1", "--resource", "astute", "--key", "k", "--value", "v", "--type", "str")
		if got := c.ok("", "lvl", "list", "--env", "1"); !strings.Contains(got, `"n1"`) {
			t.Fatal(got)
		}
		if got := c.ok("", "lvl", "show", "nodes", "--env", "1", "--format", "yaml"); !strings.Contains(got, "name: nodes") {
			t.Fatal(got)
		}
		if got := c.ok("", "env", "list"); strings.Count(got, `"id"`) != 1 {
			t.Fatal(got)
		}
		c.ok("", "env", "delete", "1")
		c.ok("", "comp", "delete", "1")
		c.fails(1, "404", "env", "delete", "1")
		c.fails(2, "is not an id", "env", "show", "x")
		c.fails(2, "expected 1 argument", "comp", "show")
		c.fails(2, "needs a subcommand", "lvl")
	})
}

func TestCredentialsAndErrors(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	base := startAPI(t, dbtest.SQLite(t), func(c *api.Config) {
		c.Auth.Tokens = []api.Token{{Name: "ops", Token: "secret", Role: api.RoleWriter}}
		c.Auth.Users = []api.User{{Username: "reader", PasswordHash: string(hash), Role: api.RoleReader}}
	})
	c := &cli{t: t, env: map[string]string{EnvBridgeURL: base}}
	c.fails(1, "401 Unauthorized: credentials required", "env", "list")
	c.env[EnvToken] = "wrong"
	c.fails(1, "403 Forbidden: invalid token", "env", "list")
	c.env[EnvToken] = "secret"
	c.ok("", "comp", "create", "--name", "fuel")
	delete(c.env, EnvToken)
	c.env[EnvUser], c.env[EnvPassword] = "reader", "pw"
	c.ok("", "comp", "list")
	c.fails(1, "reader role", "comp", "delete", "1")
	// The flag beats the environment.
	c.ok("", "comp", "delete", "1", "--token", "secret")

	// Nothing listening: exit 1.
	c.fails(1, "connection refused", "env", "list", "--url", "http://127.0.0.1:1/api/v1/config")
}

// TestFirstSetIsNoRefusal: setting a key where nothing is stored yet sends
// no request the server refuses (each refusal is logged there).
func TestFirstSetIsNoRefusal(t *testing.T) {
	cfg := api.DefaultConfig()
	cfg.DSN = dbtest.SQLite(t)
	h, err := api.Open(context.Background(), cfg, api.Options{Options: intake.Options{Publisher: testbus.Start(t), Logger: zerolog.Nop()}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	var mu sync.Mutex
	var refused []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: 200}
		mux.ServeHTTP(rec, r)
		if rec.status >= 400 {
			mu.Lock()
			refused = append(refused, fmt.Sprintf("%s %s: %d", r.Method, r.URL.Path, rec.status))
			mu.Unlock()
		}
	}))
	t.Cleanup(func() { srv.Close(); _ = h.Close(context.Background()) })
	c := newCLI(t, srv.URL)
	c.setup()
	for _, level := range []string{"nodes=n1", "nodes=n2"} {
		c.ok("", "set", "--env", "1", "--level", level, "--resource", "astute", "--key", "k", "--value", "v")
		c.ok("", "set", "--env", "1", "--level", level, "--resource", "astute", "--key", "k2", "--value", "v")
		c.ok("", "override", "--env", "1", "--level", level, "--resource", "astute", "--key", "k", "--value", "o")
	}
	if got := c.ok("", "get", "--env", "1", "--level", "nodes=n2", "--resource", "astute", "--format", "yaml"); got != "k: o\nk2: v\n" {
		t.Fatalf("%q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(refused) > 0 {
		t.Fatalf("the server refused %v", refused)
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}
