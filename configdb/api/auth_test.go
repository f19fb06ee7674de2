package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/opsfirehose/firehose/httpserver"
)

func bcryptHash(t *testing.T, password string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

func TestStaticTokensAndBasicAuth(t *testing.T) {
	eachDB(t, testStaticTokensAndBasicAuth)
}

func testStaticTokensAndBasicAuth(t *testing.T, dsn string) {
	s := startServer(t, dsn, serverOptions{cfg: func(c *Config) {
		c.Auth.Tokens = []Token{{Name: "puppet", Token: "r-token", Role: RoleReader}, {Name: "deployer", Token: "w-token", Role: RoleWriter}}
		c.Auth.Users = []User{{Username: "alice", PasswordHash: bcryptHash(t, "secret"), Role: RoleWriter}, {Username: "bob", PasswordHash: bcryptHash(t, "hunter2"), Role: RoleReader}}
	}})
	r := s.must(401, "GET", "/components", nil)
	if r.header.Get("WWW-Authenticate") == "" {
		t.Fatal("401 without WWW-Authenticate")
	}
	r.msg(t)
	s.must(403, "GET", "/components", nil, "X-Auth-Token", "nope").msg(t)
	s.must(200, "GET", "/components", nil, "X-Auth-Token", "r-token")
	s.must(200, "GET", "/components", nil, "Authorization", "Bearer r-token")
	s.must(403, "POST", "/components", map[string]any{"name": "x"}, "X-Auth-Token", "r-token").msg(t)
	s.must(201, "POST", "/components", map[string]any{"name": "fuel", "resource_definitions": []any{map[string]any{"name": "astute"}}}, "X-Auth-Token", "w-token")
	s.must(201, "POST", "/environments", map[string]any{"id": 1, "components": []any{1}, "hierarchy_levels": []any{}}, "X-Auth-Token", "w-token")

	basic := func(user, password string) []string {
		req, _ := http.NewRequest("GET", "/", nil)
		req.SetBasicAuth(user, password)
		return []string{"Authorization", req.Header.Get("Authorization")}
	}
	s.must(204, "PUT", "/environments/1/resources/astute/values", map[string]any{"a": 1}, basic("alice", "secret")...)
	s.must(204, "PUT", "/environments/1/resources/astute/values", map[string]any{"a": 2}, basic("alice", "secret")...) // from the verified cache
	s.must(403, "PUT", "/environments/1/resources/astute/values", map[string]any{"a": 3}, basic("alice", "wrong")...)
	s.must(403, "PUT", "/environments/1/resources/astute/values", map[string]any{"a": 3}, basic("mallory", "secret")...)
	s.must(200, "GET", "/environments/1/resources/astute/values?effective", nil, basic("bob", "hunter2")...)
	s.must(403, "PUT", "/environments/1/resources/astute/values", map[string]any{"a": 3}, basic("bob", "hunter2")...)
	s.must(204, "PUT", "/environments/1/resources/astute/overrides", map[string]any{"a": 3}, "X-Auth-Token", "w-token")

	var hist []struct{ Author string }
	if err := json.Unmarshal(s.must(200, "GET", "/environments/1/resources/astute/history", nil, "X-Auth-Token", "r-token").body, &hist); err != nil {
		t.Fatal(err)
	}
	if len(hist) != 3 || hist[0].Author != "alice" || hist[2].Author != "deployer" {
		t.Fatalf("authors: %+v", hist)
	}
}

// keystoneStandIn answers GET /v3/auth/tokens like Keystone does.
type keystoneStandIn struct {
	srv          *httptest.Server
	requests     atomic.Int64
	serviceToken string
	tokens       map[string]string // subject token -> token JSON
}

func newKeystoneStandIn(t *testing.T, serviceToken string) *keystoneStandIn {
	k := &keystoneStandIn{serviceToken: serviceToken, tokens: map[string]string{
		"ks-admin":   `{"token": {"expires_at": "2999-01-01T00:00:00.000000Z", "user": {"id": "u1", "name": "admin", "domain": {"name": "Default"}}, "roles": [{"id": "r1", "name": "admin"}, {"id": "r2", "name": "member"}]}}`,
		"ks-member":  `{"token": {"expires_at": "2999-01-01T00:00:00.000000Z", "user": {"id": "u2", "name": "joe", "domain": {"name": "corp"}}, "roles": [{"id": "r2", "name": "member"}]}}`,
		"ks-norole":  `{"token": {"expires_at": "2999-01-01T00:00:00.000000Z", "user": {"id": "u3", "name": "eve"}, "roles": [{"id": "r9", "name": "heat_stack_owner"}]}}`,
		"ks-expired": `{"token": {"expires_at": "2000-01-01T00:00:00.000000Z", "user": {"id": "u1", "name": "admin"}, "roles": [{"name": "admin"}]}}`,
	}}
	k.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.requests.Add(1)
		if r.Method != http.MethodGet || r.URL.Path != "/v3/auth/tokens" {
			http.NotFound(w, r)
			return
		}
		subject := r.Header.Get("X-Subject-Token")
		auth := r.Header.Get("X-Auth-Token")
		if (k.serviceToken != "" && auth != k.serviceToken) || (k.serviceToken == "" && auth != subject) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		body, ok := k.tokens[subject]
		if !ok {
			http.Error(w, `{"error": {"code": 404, "title": "Not Found"}}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Subject-Token", subject)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(k.srv.Close)
	return k
}

func TestKeystoneTokens(t *testing.T) {
	for _, serviceToken := range []string{"", "svc-secret"} {
		t.Run("service_token="+serviceToken, func(t *testing.T) {
			eachDB(t, func(t *testing.T, dsn string) { testKeystoneTokens(t, dsn, serviceToken) })
		})
	}
}

func testKeystoneTokens(t *testing.T, dsn, serviceToken string) {
	ks := newKeystoneStandIn(t, serviceToken)
	s := startServer(t, dsn, serverOptions{cfg: func(c *Config) {
		k := &KeystoneConfig{URL: ks.srv.URL + "/v3/", ServiceToken: serviceToken}
		k.SetDefaults()
		c.Auth.Keystone = k
		c.Auth.Tokens = []Token{{Name: "static", Token: "static-token", Role: RoleWriter}}
	}})
	s.must(201, "POST", "/components", map[string]any{"name": "fuel"}, "X-Auth-Token", "ks-admin")
	s.must(201, "POST", "/components", map[string]any{"name": "static"}, "X-Auth-Token", "static-token")
	s.must(200, "GET", "/components", nil, "X-Auth-Token", "ks-member")
	s.must(403, "POST", "/components", map[string]any{"name": "x"}, "X-Auth-Token", "ks-member")
	s.must(403, "GET", "/components", nil, "X-Auth-Token", "ks-norole")
	s.must(403, "GET", "/components", nil, "X-Auth-Token", "ks-expired")
	s.must(403, "GET", "/components", nil, "X-Auth-Token", "ks-unknown")
	// Valid tokens are cached: asking again does not reach Keystone.
	before := ks.requests.Load()
	for range 3 {
		s.must(200, "GET", "/components", nil, "X-Auth-Token", "ks-member")
	}
	if ks.requests.Load() != before {
		t.Fatalf("%d Keystone requests for cached tokens", ks.requests.Load()-before)
	}
	// The author of a change is Keystone's user name.
	var comps []struct{ Name string }
	_ = json.Unmarshal(s.must(200, "GET", "/components", nil, "X-Auth-Token", "ks-admin").body, &comps)
	if len(comps) != 2 {
		t.Fatal(comps)
	}
	// Keystone down: the request may be retried, so 503.
	ks.srv.Close()
	r := s.must(503, "GET", "/components", nil, "X-Auth-Token", "ks-other")
	if r.header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	s.must(200, "GET", "/components", nil, "X-Auth-Token", "ks-member") // still cached
}

func TestKeystoneCacheExpires(t *testing.T) {
	ks := newKeystoneStandIn(t, "")
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	k := NewKeystone(KeystoneConfig{URL: ks.srv.URL, ReaderRoles: []string{"member"}, WriterRoles: []string{"admin"}, CacheTTL: time.Minute, Timeout: time.Second}, nil, func() time.Time { return now })
	id, err := k.CheckToken(t.Context(), "ks-member")
	if err != nil || id.Name != "joe@corp" || id.Role != RoleReader {
		t.Fatalf("%+v %v", id, err)
	}
	now = now.Add(30 * time.Second)
	_, _ = k.CheckToken(t.Context(), "ks-member")
	if ks.requests.Load() != 1 {
		t.Fatalf("%d requests within the TTL", ks.requests.Load())
	}
	now = now.Add(time.Minute)
	_, _ = k.CheckToken(t.Context(), "ks-member")
	if ks.requests.Load() != 2 {
		t.Fatalf("%d requests after the TTL", ks.requests.Load())
	}
}

// TestSharedTokens: with http.tokens set and no configdb.auth, ConfigDB is
// not open: it takes the listener's tokens, each with the writer role, and
// nothing else. configdb.auth, once set, replaces them.
func TestSharedTokens(t *testing.T) {
	eachDB(t, testSharedTokens)
}

func testSharedTokens(t *testing.T, dsn string) {
	shared := httpserver.NewTokens([]httpserver.Token{{Name: "ops", Token: "listener-token"}})
	s := startServer(t, dsn, serverOptions{shared: shared})
	s.must(401, "GET", "/components", nil).msg(t)
	s.must(403, "GET", "/components", nil, "X-Auth-Token", "nope").msg(t)
	s.must(201, "POST", "/components", map[string]any{"name": "fuel", "resource_definitions": []any{map[string]any{"name": "astute"}}}, "X-Auth-Token", "listener-token")
	s.must(201, "POST", "/environments", map[string]any{"id": 1, "components": []any{1}, "hierarchy_levels": []any{}}, "Authorization", "Bearer listener-token")
	s.must(204, "PUT", "/environments/1/resources/astute/values", map[string]any{"a": 1}, "X-Auth-Token", "listener-token")
	var hist []struct{ Author string }
	if err := json.Unmarshal(s.must(200, "GET", "/environments/1/resources/astute/history", nil, "X-Auth-Token", "listener-token").body, &hist); err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 || hist[0].Author != "ops" {
		t.Fatalf("authors: %+v", hist)
	}

	own := startServer(t, freshDSN(t, dsn), serverOptions{shared: shared, cfg: func(c *Config) {
		c.Auth.Tokens = []Token{{Name: "hiera", Token: "own-token", Role: RoleReader}}
	}})
	own.must(403, "GET", "/components", nil, "X-Auth-Token", "listener-token").msg(t)
	own.must(200, "GET", "/components", nil, "X-Auth-Token", "own-token")

	// Neither: open, as on a loopback listener with no tokens at all.
	open := startServer(t, freshDSN(t, dsn), serverOptions{shared: httpserver.NewTokens(nil)})
	open.must(201, "POST", "/components", map[string]any{"name": "x", "resource_definitions": []any{}})
}

func TestAuthConfigured(t *testing.T) {
	c := DefaultConfig()
	if c.AuthConfigured() {
		t.Fatal("default config has auth")
	}
	c.Auth.Users = []User{{Username: "a"}}
	if !c.AuthConfigured() {
		t.Fatal("users do not count")
	}
}
