package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opsfirehose/firehose/internal/testkit"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

func write(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const testHash = "$2a$04$J.njDVe3K8xZ4SRzBEEeFuT2OPJX8rl56TLr9/HCAc0gihaM4RiOa" // bcrypt of "test", cost 4

func TestNoConfigIsValid(t *testing.T) {
	cfg, err := Load("", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTP.Address != "127.0.0.1:8080" {
		t.Errorf("http.address = %q", cfg.HTTP.Address)
	}
	if len(cfg.Broker.Listeners) != 2 || cfg.Broker.Listeners[0].Address != ":1883" || cfg.Broker.Listeners[1].Address != ":8083" {
		t.Errorf("listeners = %+v", cfg.Broker.Listeners)
	}
	if !cfg.Broker.AllowAnonymous || len(cfg.Broker.Users) != 0 {
		t.Errorf("broker access: anonymous=%v users=%d", cfg.Broker.AllowAnonymous, len(cfg.Broker.Users))
	}
	// The defaults must pass the same validation as a file.
	if err := Parse(nil, cfg, Options{}); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}

func TestExampleConfigLoads(t *testing.T) {
	certs := testkit.TLS(t)
	vars := map[string]string{
		"FIREHOSE_CHEF_TOKEN":              "chef-token",
		"FIREHOSE_CI_TOKEN_FILE":           write(t, "ci-token", "ci-token\n"),
		"FIREHOSE_TLS_CERT":                certs.CertFile,
		"FIREHOSE_TLS_KEY":                 certs.KeyFile,
		"FIREHOSE_MONITORING_HASH_FILE":    write(t, "hash", testHash+"\n"),
		"FIREHOSE_GERRIT_TOKEN":            "gerrit-token",
		"FIREHOSE_ANSIBLE_TOKEN":           "ansible-token",
		"FIREHOSE_LAUNCHPAD_TOKEN":         "launchpad-token",
		"FIREHOSE_CONFIGDB_DEPLOYER_TOKEN": "deployer-token",
		"FIREHOSE_CONFIGDB_HIERA_TOKEN":    "hiera-token",
	}
	cfg, err := Load("../config.example.yaml", Options{LookupEnv: env(vars)})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.HTTP.Tokens[1].Token; got != "ci-token" {
		t.Errorf("token_file gave %q", got)
	}
	if cfg.Gerrit.Tokens[0].Token != "gerrit-token" || cfg.Launchpad.Tokens[0].Token != "launchpad-token" || !cfg.Chef.Enabled || cfg.Subunit.MaxBody != 128<<20 {
		t.Errorf("adapter sections: gerrit %+v launchpad %+v chef enabled %v subunit max_body %d",
			cfg.Gerrit.Tokens, cfg.Launchpad.Tokens, cfg.Chef.Enabled, cfg.Subunit.MaxBody)
	}
	if len(cfg.Ansible.Tokens) != 1 || cfg.Ansible.Tokens[0].Token != "ansible-token" || cfg.Ansible.MaxBatch != 1000 {
		t.Errorf("ansible: %+v", cfg.Ansible)
	}
	if len(cfg.ConfigDB.Auth.Tokens) != 2 || cfg.ConfigDB.Auth.Tokens[1].Token != "hiera-token" {
		t.Errorf("configdb.auth.tokens: %+v", cfg.ConfigDB.Auth.Tokens)
	}
	if got := cfg.Broker.Users[1].PasswordHash; got != testHash {
		t.Errorf("password_hash_file gave %q", got)
	}
	names := []string{}
	for _, l := range cfg.Broker.Listeners {
		names = append(names, l.Name+"="+l.Address)
	}
	if got := strings.Join(names, " "); got != "mqtt=:1883 mqtts=:8883 ws=:80 wss=:443" {
		t.Errorf("listeners: %s", got)
	}
	if cfg.ShutdownTimeout != 15*time.Second || cfg.Broker.MaxSessionExpiry != 24*time.Hour {
		t.Errorf("durations: %v %v", cfg.ShutdownTimeout, cfg.Broker.MaxSessionExpiry)
	}
}

func TestExampleConfigNamesMissingEnvironment(t *testing.T) {
	_, err := Load("../config.example.yaml", Options{LookupEnv: env(nil)})
	if err == nil || !strings.Contains(err.Error(), "http.tokens[0].token: environment variable FIREHOSE_CHEF_TOKEN is not set") {
		t.Fatalf("err = %v", err)
	}
}

func TestBadConfigReportsEveryProblemByKey(t *testing.T) {
	path := write(t, "bad.yaml", `
log:
  levle: debug
http:
  address: 127.0.0.1:8080
  read_timeout: 30
broker:
  max_queued_messages: lots
  listeners:
    - name: mqtts
      address: :8883
      tls:
        cert_file: /nonexistent/cert.pem
        key_file: /nonexistent/key.pem
    - type: carrier-pigeon
      address: nowhere
  users:
    - username: ansible
      password_hash: plaintext
      publish: ["ansible/#/x"]
`)
	_, err := Load(path, Options{LookupEnv: env(nil)})
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{
		`log.levle: unknown key (did you mean "level"?)`,
		`http.read_timeout:`,
		`broker.max_queued_messages: expected an integer`,
		`broker.listeners[0].tls.cert_file: `,
		`/nonexistent/cert.pem`,
		`broker.listeners[1].type: "carrier-pigeon" is not a listener type`,
		`broker.listeners[1].address: "nowhere" is not host:port`,
		`broker.users[0].password_hash: not a bcrypt hash`,
		`broker.users[0].publish[0]: `,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestSecureByDefault(t *testing.T) {
	tests := []struct {
		yaml    string
		wantErr bool
	}{
		{"http: {address: 127.0.0.1:8080}", false},
		{"http: {address: '[::1]:8080'}", false},
		{"http: {address: localhost:8080}", false},
		{"http: {address: 0.0.0.0:8080}", true},
		{"http: {address: ':8080'}", true},
		{"http: {address: 'bridge.example.com:8080'}", true},
		{"http: {address: 0.0.0.0:8080, allow_unauthenticated: true}", false},
		{"http: {address: 0.0.0.0:8080, tokens: [{name: ci, token: abc}]}", false},
	}
	for _, tt := range tests {
		cfg := Default()
		err := Parse([]byte(tt.yaml), &cfg, Options{LookupEnv: env(nil)})
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: err = %v, want error: %v", tt.yaml, err, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "http.allow_unauthenticated") {
			t.Errorf("%s: error does not name http.allow_unauthenticated: %v", tt.yaml, err)
		}
	}
}

// TestSecureByDefaultPerSection: beyond loopback with no http.tokens, every
// enabled intake needs tokens of its own, and the error names those without.
func TestSecureByDefaultPerSection(t *testing.T) {
	defaults := Default()
	intakes := defaults.Intakes()
	if len(intakes) < 4 {
		t.Fatalf("Intakes() = %d sections, want every adapter", len(intakes))
	}
	doc := func(skip, disable string) string {
		s := "http: {address: 0.0.0.0:8080}\n"
		for _, in := range intakes {
			switch in.Key {
			case skip:
			case disable:
				s += in.Key + ": {enabled: false}\n"
			case "configdb": // its own auth, with roles, instead of tokens
				s += "configdb: {auth: {tokens: [{name: own, token: secret-configdb, role: writer}]}}\n"
			default:
				s += in.Key + ": {tokens: [{name: own, token: secret-" + in.Key + "}]}\n"
			}
		}
		return s
	}
	parse := func(y string) error {
		cfg := Default()
		return Parse([]byte(y), &cfg, Options{LookupEnv: env(nil)})
	}
	if err := parse(doc("", "")); err != nil {
		t.Fatalf("every section has its own tokens: %v", err)
	}
	for _, in := range intakes {
		err := parse(doc(in.Key, ""))
		if err == nil || !strings.Contains(err.Error(), "http.allow_unauthenticated") || !strings.Contains(err.Error(), in.Key) {
			t.Errorf("%s without tokens: err = %v, want one naming http.allow_unauthenticated and %s", in.Key, err, in.Key)
		}
		if err := parse(doc("", in.Key)); err != nil {
			t.Errorf("%s disabled, the others with tokens: %v", in.Key, err)
		}
	}
}

func TestUsersFile(t *testing.T) {
	users := write(t, "users.yaml", "users:\n  - username: gerrit\n    password_hash: "+testHash+"\n    publish: [gerrit/#]\n")
	cfg := Default()
	err := Parse([]byte(`
broker:
  users_file: `+users+`
  users:
    - {username: ansible, password_hash: "`+testHash+`", publish: [ansible/#]}
`), &cfg, Options{LookupEnv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Broker.Users) != 2 || cfg.Broker.Users[1].Username != "gerrit" || cfg.Broker.Users[1].Publish[0] != "gerrit/#" {
		t.Fatalf("users = %+v", cfg.Broker.Users)
	}

	dup := write(t, "dup.yaml", "users:\n  - {username: ansible, password_hash: \""+testHash+"\"}\n  - {username: x, pasword_hash: y}\n")
	cfg = Default()
	err = Parse([]byte(`
broker:
  users_file: `+dup+`
  users:
    - {username: ansible, password_hash: "`+testHash+`"}
`), &cfg, Options{LookupEnv: env(nil)})
	if err == nil || !strings.Contains(err.Error(), "broker.users_file: in "+dup+": users[1].pasword_hash: unknown key") {
		t.Fatalf("err = %v", err)
	}

	cfg = Default()
	dupOnly := write(t, "dup2.yaml", "users:\n  - {username: ansible, password_hash: \""+testHash+"\"}\n")
	err = Parse([]byte("broker:\n  users_file: "+dupOnly+"\n  users:\n    - {username: ansible, password_hash: \""+testHash+"\"}\n"), &cfg, Options{LookupEnv: env(nil)})
	if err == nil || !strings.Contains(err.Error(), `broker.users_file: users[0]: "ansible" is also defined in broker.users`) {
		t.Fatalf("err = %v", err)
	}
}

func TestRelativeUsersFileIsTakenFromTheConfigsDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "users.yaml"), []byte("users:\n  - {username: gerrit, password_hash: \""+testHash+"\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "firehose.yaml")
	if err := os.WriteFile(path, []byte("broker:\n  users_file: users.yaml\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The working directory (this package's) holds no users.yaml.
	cfg, err := Load(path, Options{LookupEnv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Broker.Users) != 1 || cfg.Broker.Users[0].Username != "gerrit" {
		t.Fatalf("users = %+v", cfg.Broker.Users)
	}
	if want := filepath.Join(dir, "users.yaml"); cfg.Broker.UsersFile != want {
		t.Errorf("users_file = %q, want %q", cfg.Broker.UsersFile, want)
	}

	// A missing one is reported with the path that was tried.
	missing := filepath.Join(dir, "nobody.yaml")
	if err := os.WriteFile(path, []byte("broker:\n  users_file: nobody.yaml\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, Options{LookupEnv: env(nil)}); err == nil || !strings.Contains(err.Error(), "broker.users_file: open "+missing) {
		t.Fatalf("err = %v, want one naming broker.users_file and %s", err, missing)
	}
}

func TestGiven(t *testing.T) {
	cfg := Default()
	err := Parse([]byte(`
http:
  address: "127.0.0.1:0"
chef:
  <<: {enabled: false}
routes: []
`), &cfg, Options{LookupEnv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{
		"http": true, "http.address": true, "http.tokens": false,
		"chef": true, "chef.enabled": true, "routes": true,
		"sinks": false, "broker": false, "data_dir": false,
	} {
		if got := cfg.Given(key); got != want {
			t.Errorf("Given(%q) = %v, want %v", key, got, want)
		}
	}
	if def := Default(); def.Given("http.address") {
		t.Error("the defaults claim http.address was given")
	}
}
