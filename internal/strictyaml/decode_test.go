package strictyaml

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testOptions resolves environment variables from env and files from files.
func testOptions(env, files map[string]string) Options {
	return Options{
		LookupEnv: func(name string) (string, bool) {
			v, ok := env[name]
			return v, ok
		},
		ReadFile: func(path string) ([]byte, error) {
			if content, ok := files[path]; ok {
				return []byte(content), nil
			}
			return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
		},
	}
}

// messages returns the Error() of every *KeyError in err, checking that err
// is an errors.Join of *KeyError.
func messages(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	u, ok := err.(interface{ Unwrap() []error })
	require.Truef(t, ok, "error %T is not an errors.Join", err)
	var out []string
	for _, e := range u.Unwrap() {
		ke, ok := e.(*KeyError)
		require.Truef(t, ok, "error %T is not a *KeyError: %v", e, e)
		out = append(out, ke.Error())
	}
	return out
}

// keyErrors returns the *KeyError values joined in err.
func keyErrors(t *testing.T, err error) []*KeyError {
	t.Helper()
	require.Error(t, err)
	var out []*KeyError
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		out = append(out, e.(*KeyError))
	}
	return out
}

func TestDecode(t *testing.T) {
	env := map[string]string{
		"HOST":       "broker.local",
		"PORT":       "9000",
		"EMPTY":      "",
		"TRUE":       "true",
		"TIMEOUT":    "1m30s",
		"CHEF_TOKEN": "chef-secret",
		"DOLLAR":     "${HOST}",
	}
	files := map[string]string{
		"/run/secrets/token":      "file-token\n",
		"/run/secrets/crlf":       "crlf-token\r\n",
		"/run/secrets/two":        "two\n\n",
		"/run/secrets/none":       "plain",
		"/run/secrets/user":       "hunter2\n",
		"/run/secrets/level":      "debug\n",
		"/run/secrets/bcrypt":     "$2a$10$abc${X}\n",
		"/run/secrets/not-a-path": "x",
	}
	tests := []struct {
		name  string
		yaml  string
		check func(t *testing.T, c *config) // nil: no check
		errs  []string                      // exact messages, in order
	}{
		// Documents.
		{name: "empty document keeps defaults", yaml: "",
			check: func(t *testing.T, c *config) { assert.Equal(t, defaultConfig(), *c) }},
		{name: "comments only", yaml: "# nothing here\n\n# really\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, defaultConfig(), *c) }},
		{name: "null document", yaml: "null\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, defaultConfig(), *c) }},
		{name: "tilde document", yaml: "---\n~\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, defaultConfig(), *c) }},
		{name: "explicit empty document", yaml: "---\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, defaultConfig(), *c) }},
		{name: "document is a sequence", yaml: "- a\n- b\n",
			errs: []string{`expected a mapping, got a sequence`}},
		{name: "document is a scalar", yaml: "hello\n",
			errs: []string{`expected a mapping, got "hello"`}},
		{name: "two documents", yaml: "debug: true\n---\nport: 1\n",
			check: func(t *testing.T, c *config) { assert.True(t, c.Debug) },
			errs:  []string{`a second YAML document starts on line 2; put all settings in one document`}},
		{name: "two documents, first with an error", yaml: "debug: 1\n---\n",
			errs: []string{`debug: expected true or false, got "1"`, `a second YAML document starts on line 2; put all settings in one document`}},
		{name: "document end marker is fine", yaml: "debug: true\n...\n",
			check: func(t *testing.T, c *config) { assert.True(t, c.Debug) }},
		{name: "syntax error", yaml: "debug: true\nbroker:\n  address: x\n   max_queued: 1\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, defaultConfig(), *c) },
			errs:  []string{`invalid YAML on line 4, column 4: mapping values are not allowed in this context`}},
		{name: "syntax error on line 1", yaml: "a: b: c\n",
			errs: []string{`invalid YAML on line 1, column 4: mapping values are not allowed in this context`}},
		{name: "unknown alias", yaml: "broker: *nope\n",
			errs: []string{`invalid YAML on line 1, column 9: unknown anchor 'nope' referenced`}},
		// yaml.v3 names the line its mapping starts on, not the bad one (issue 26).
		{name: "a key less indented than its siblings", yaml: "debug: true\nbroker:\n  address: x\n max_queued: 1\n",
			errs: []string{`invalid YAML on line 4, column 2: did not find expected key`}},
		{name: "a bad line 3", yaml: "debug: true\nport: 1\n- x\n",
			errs: []string{`invalid YAML on line 3, column 1: did not find expected key`}},
		{name: "a bad line 6", yaml: "broker:\n  address: x\n  max_queued: 1\n  a: 1\n  b: 2\n c: 3\n",
			errs: []string{`invalid YAML on line 6, column 2: did not find expected key`}},
		{name: "a tab on line 3", yaml: "debug: true\nport: 1\n\tbroker: {}\n",
			errs: []string{`invalid YAML on line 3, column 1: found a tab character that violates indentation`}},
		{name: "an unclosed flow sequence", yaml: "debug: true\nbroker:\n  tokens: [a, b\nport: 1\n",
			errs: []string{`invalid YAML on line 3, column 11: did not find expected ',' or ']'`}},

		// Keys.
		{name: "defaults kept for absent keys", yaml: "broker:\n  address: x:1\n",
			check: func(t *testing.T, c *config) {
				want := defaultConfig()
				want.Broker.Address = "x:1"
				assert.Equal(t, want, *c)
			}},
		{name: "unknown key with suggestion", yaml: "broker:\n  adress: x\n",
			errs: []string{`broker.adress: unknown key (did you mean "address"?)`}},
		{name: "unknown key, case-insensitive suggestion", yaml: "broker:\n  MAX_QUEUED: 1\n",
			errs: []string{`broker.MAX_QUEUED: unknown key (did you mean "max_queued"?)`}},
		{name: "unknown key without suggestion", yaml: "broker:\n  whatever: x\n",
			errs: []string{`broker.whatever: unknown key; valid keys: address, listeners, max_queued, tls, users`}},
		{name: "unknown key at the root", yaml: "brokr: {}\n",
			errs: []string{`brokr: unknown key (did you mean "broker"?)`}},
		{name: "valid keys list secret file keys", yaml: "http:\n  nothing: 1\n",
			errs: []string{`http.nothing: unknown key; valid keys: address, level, read_timeout, token, token_file, tokens`}},
		{name: "yaml:\"-\" is not a key", yaml: "ignored: x\n",
			errs: []string{`ignored: unknown key; valid keys: broker, debug, extra, hosts, http, instance, level, notag, pair, port, ptr, ratio, routes, small, tags`}},
		{name: "untagged field uses lower-cased name", yaml: "notag: x\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, "x", c.NoTag) }},
		{name: "untagged field name is case-sensitive", yaml: "NoTag: x\n",
			errs: []string{`NoTag: unknown key (did you mean "notag"?)`}},
		{name: "inline struct keys", yaml: "instance: edge-1\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, "edge-1", c.Instance) }},
		{name: "duplicate key", yaml: "broker:\n  address: a\n  max_queued: 1\n  address: b\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, "a", c.Broker.Address) },
			errs:  []string{`broker.address: duplicate key (first given on line 2); remove one`}},
		{name: "duplicate key in a map", yaml: "tags:\n  a: 1\n  a: 2\n",
			errs: []string{`tags.a: duplicate key (first given on line 2); remove one`}},
		{name: "integer key in a struct", yaml: "broker:\n  1: x\n",
			errs: []string{`broker.1: key must be a string, not an integer`}},
		{name: "boolean key in a struct", yaml: "true: x\n",
			errs: []string{`true: key must be a string, not a boolean`}},
		{name: "sequence key in a struct", yaml: "? [a]\n: x\n",
			errs: []string{`key must be a string, not a sequence`}},
		{name: "quoted key is a string", yaml: "\"debug\": true\n",
			check: func(t *testing.T, c *config) { assert.True(t, c.Debug) }},

		// Types.
		{name: "scalars", yaml: "debug: TRUE\nsmall: -128\nport: 0x1F90\nratio: 0.5\nlevel: debug\nnotag: 123\n",
			check: func(t *testing.T, c *config) {
				assert.True(t, c.Debug)
				assert.Equal(t, int8(-128), c.Small)
				assert.Equal(t, uint16(8080), c.Port)
				assert.Equal(t, 0.5, c.Ratio)
				assert.Equal(t, level(1), c.Level)
				assert.Equal(t, "123", c.NoTag)
			}},
		{name: "quoted numbers and bools are accepted", yaml: "debug: \"false\"\nsmall: '7'\nport: \"80\"\nratio: '1e2'\n",
			check: func(t *testing.T, c *config) {
				assert.False(t, c.Debug)
				assert.Equal(t, int8(7), c.Small)
				assert.Equal(t, uint16(80), c.Port)
				assert.Equal(t, 100.0, c.Ratio)
			}},
		{name: "quoted number into a string", yaml: "notag: \"123\"\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, "123", c.NoTag) }},
		{name: "null into a string gives empty", yaml: "notag: ~\ninstance:\n",
			check: func(t *testing.T, c *config) {
				assert.Equal(t, "", c.NoTag)
				assert.Equal(t, "", c.Instance)
			}},
		{name: "special floats", yaml: "ratio: -.inf\n",
			check: func(t *testing.T, c *config) { assert.True(t, c.Ratio < -1e308) }},
		{name: "string into int", yaml: "broker:\n  max_queued: lots\n",
			errs: []string{`broker.max_queued: expected an integer, got "lots"`}},
		{name: "float into int", yaml: "broker:\n  max_queued: 1.5\n",
			errs: []string{`broker.max_queued: expected an integer, got "1.5"`}},
		{name: "null into int", yaml: "broker:\n  max_queued:\n",
			errs: []string{`broker.max_queued: expected an integer, got null (remove the key to keep the default)`}},
		{name: "int overflow into int8", yaml: "small: 128\n",
			errs: []string{`small: 128 is out of range (must be from -128 to 127)`}},
		{name: "int underflow into int8", yaml: "small: -129\n",
			errs: []string{`small: -129 is out of range (must be from -128 to 127)`}},
		{name: "int overflow into int64", yaml: "broker:\n  max_queued: 99999999999999999999\n",
			errs: []string{`broker.max_queued: 99999999999999999999 is out of range (must be from -9223372036854775808 to 9223372036854775807)`}},
		{name: "negative into uint16", yaml: "port: -1\n",
			errs: []string{`port: -1 is out of range (must be from 0 to 65535)`}},
		{name: "overflow into uint16", yaml: "port: 65536\n",
			errs: []string{`port: 65536 is out of range (must be from 0 to 65535)`}},
		{name: "string into uint", yaml: "port: http\n",
			errs: []string{`port: expected an integer, got "http"`}},
		{name: "float out of range", yaml: "ratio: 1e400\n",
			errs: []string{`ratio: 1e400 is out of range`}},
		{name: "float nan and +inf", yaml: "ratio: .NaN\nextra: +.inf\n",
			check: func(t *testing.T, c *config) { assert.True(t, c.Ratio != c.Ratio) }},
		{name: "null into bool", yaml: "debug: ~\n",
			errs: []string{`debug: expected true or false, got null (remove the key to keep the default)`}},
		{name: "mapping into duration", yaml: "http:\n  read_timeout: {s: 1}\n",
			errs: []string{`http.read_timeout: expected a duration, got a mapping`}},
		{name: "scalar into array", yaml: "pair: 1\n",
			errs: []string{`pair: expected a sequence of 2 items, got "1"`}},
		{name: "alias as a key", yaml: "broker:\n  address: &k max_queued\n  *k : 5\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, 5, c.Broker.MaxQueued) }},
		{name: "env error in a TextUnmarshaler", yaml: "level: ${LEVEL}\n",
			errs: []string{`level: environment variable LEVEL is not set (use ${LEVEL:-} to allow empty)`}},
		{name: "long values are clipped in messages", yaml: "port: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
			errs: []string{`port: expected an integer, got "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa…"`}},
		{name: "integer forms", yaml: "small: -0x10\nport: 0o17\nbroker:\n  max_queued: +0b101\nptr: -9223372036854775808\n",
			check: func(t *testing.T, c *config) {
				assert.Equal(t, int8(-16), c.Small)
				assert.Equal(t, uint16(15), c.Port)
				assert.Equal(t, 5, c.Broker.MaxQueued)
				assert.Equal(t, int64(math.MinInt64), int64(*c.Ptr))
			}},
		{name: "zero forms", yaml: "small: -0\nport: 0\n",
			check: func(t *testing.T, c *config) {
				assert.Equal(t, int8(0), c.Small)
				assert.Equal(t, uint16(0), c.Port)
			}},
		{name: "leading zero is ambiguous", yaml: "port: 0644\nsmall: -007\n",
			errs: []string{
				`port: ambiguous number "0644": write 0o644 for octal or 644 for decimal`,
				`small: ambiguous number "-007": write -0o7 for octal or -7 for decimal`,
			}},
		{name: "not YAML integers", yaml: "port: 1_000\nsmall: 0x\nbroker:\n  max_queued: --1\n",
			errs: []string{
				`port: expected an integer, got "1_000"`,
				`small: expected an integer, got "0x"`,
				`broker.max_queued: expected an integer, got "--1"`,
			}},
		{name: "int64 overflow by one", yaml: "ptr: 9223372036854775808\n",
			errs: []string{`ptr: 9223372036854775808 is out of range (must be from -9223372036854775808 to 9223372036854775807)`}},
		{name: "string into float", yaml: "ratio: half\n",
			errs: []string{`ratio: expected a number, got "half"`}},
		{name: "sequence into string", yaml: "http:\n  address: [a, b]\n",
			errs: []string{`http.address: expected a string, got a sequence`}},
		{name: "mapping into string", yaml: "http:\n  address: {a: b}\n",
			errs: []string{`http.address: expected a string, got a mapping`}},
		{name: "mapping into slice", yaml: "hosts: {a: b}\n",
			errs: []string{`hosts: expected a sequence, got a mapping`}},
		{name: "scalar into slice", yaml: "hosts: a\n",
			errs: []string{`hosts: expected a sequence, got "a"`}},
		{name: "scalar into struct", yaml: "broker: localhost\n",
			errs: []string{`broker: expected a mapping, got "localhost"`}},
		{name: "sequence into map", yaml: "tags: [a]\n",
			errs: []string{`tags: expected a mapping, got a sequence`}},
		{name: "yes into bool", yaml: "debug: yes\n",
			errs: []string{`debug: expected true or false, got "yes"; use true instead`}},
		{name: "off into bool", yaml: "debug: off\n",
			errs: []string{`debug: expected true or false, got "off"; use false instead`}},
		{name: "number into bool", yaml: "debug: 1\n",
			errs: []string{`debug: expected true or false, got "1"`}},
		{name: "duration", yaml: "http:\n  read_timeout: 1m30s\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, 90*time.Second, c.HTTP.ReadTimeout) }},
		{name: "quoted duration", yaml: "http:\n  read_timeout: \"250ms\"\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, 250*time.Millisecond, c.HTTP.ReadTimeout) }},
		{name: "bare integer into duration", yaml: "http:\n  read_timeout: 10\n",
			errs: []string{`http.read_timeout: expected a duration, got "10" (use a unit, e.g. 10s)`}},
		{name: "bad duration", yaml: "http:\n  read_timeout: soon\n",
			errs: []string{`http.read_timeout: expected a duration such as 10s or 1m30s, got "soon"`}},
		{name: "TextUnmarshaler", yaml: "level: INFO\nhttp:\n  level: debug\n",
			check: func(t *testing.T, c *config) {
				assert.Equal(t, level(2), c.Level)
				require.NotNil(t, c.HTTP.Level)
				assert.Equal(t, level(1), *c.HTTP.Level)
			}},
		{name: "TextUnmarshaler error", yaml: "level: trace\n",
			errs: []string{`level: unknown level "trace"; use debug or info`}},
		{name: "TextUnmarshaler given a sequence", yaml: "level: [debug]\n",
			errs: []string{`level: expected a string, got a sequence`}},
		{name: "pointer allocated when present", yaml: "ptr: 42\n",
			check: func(t *testing.T, c *config) {
				require.NotNil(t, c.Ptr)
				assert.Equal(t, 42, *c.Ptr)
			}},
		{name: "pointer absent stays nil", yaml: "debug: false\n",
			check: func(t *testing.T, c *config) { assert.Nil(t, c.Ptr) }},
		{name: "null pointer", yaml: "ptr: null\n",
			check: func(t *testing.T, c *config) { assert.Nil(t, c.Ptr) }},
		{name: "pointer struct from empty mapping", yaml: "broker:\n  tls: {}\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, &tlsConfig{}, c.Broker.TLS) }},
		{name: "null struct keeps defaults", yaml: "broker:\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, defaultConfig().Broker, c.Broker) }},
		{name: "slice replaces default", yaml: "hosts: [c]\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, []string{"c"}, c.Hosts) }},
		{name: "empty sequence gives empty non-nil slice", yaml: "hosts: []\n",
			check: func(t *testing.T, c *config) {
				assert.NotNil(t, c.Hosts)
				assert.Len(t, c.Hosts, 0)
			}},
		{name: "null gives nil slice", yaml: "hosts: ~\n",
			check: func(t *testing.T, c *config) { assert.Nil(t, c.Hosts) }},
		{name: "array", yaml: "pair: [1, 2]\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, [2]int{1, 2}, c.Pair) }},
		{name: "array of the wrong length", yaml: "pair: [1, 2, 3]\n",
			errs: []string{`pair: expected a sequence of 2 items, got 3 items`}},
		{name: "map replaces default", yaml: "tags:\n  team: ops\n  8080: port\n",
			check: func(t *testing.T, c *config) {
				assert.Equal(t, map[string]string{"team": "ops", "8080": "port"}, c.Tags)
			}},
		{name: "empty mapping gives empty non-nil map", yaml: "tags: {}\n",
			check: func(t *testing.T, c *config) {
				assert.NotNil(t, c.Tags)
				assert.Len(t, c.Tags, 0)
			}},
		{name: "null gives nil map", yaml: "tags:\n",
			check: func(t *testing.T, c *config) { assert.Nil(t, c.Tags) }},
		{name: "null map key", yaml: "tags:\n  ~: x\n",
			errs: []string{`tags: key must be a string, not null`}},
		{name: "map value errors name the key", yaml: "tags:\n  a: [x]\n  b.c: [y]\n  \"\": [z]\n",
			errs: []string{
				`tags.a: expected a string, got a sequence`,
				`tags["b.c"]: expected a string, got a sequence`,
				`tags[""]: expected a string, got a sequence`,
			}},
		{name: "any field", yaml: "extra:\n  a: 1\n  b: [x, true]\n  c: {d: ~}\n",
			check: func(t *testing.T, c *config) {
				assert.Equal(t, map[string]any{"a": 1, "b": []any{"x", true}, "c": map[string]any{"d": nil}}, c.Extra)
			}},
		{name: "any field scalar", yaml: "extra: 1.5\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, 1.5, c.Extra) }},
		{name: "any field null", yaml: "extra: ~\n",
			check: func(t *testing.T, c *config) { assert.Nil(t, c.Extra) }},
		{name: "any field expands env and re-resolves plain scalars", yaml: "extra:\n  port: ${PORT}\n  quoted: \"${PORT}\"\n  host: ${HOST}\n  list: [\"$${x}\"]\n",
			check: func(t *testing.T, c *config) {
				assert.Equal(t, map[string]any{"port": 9000, "quoted": "9000", "host": "broker.local", "list": []any{"${x}"}}, c.Extra)
			}},
		{name: "any field env errors name the nested key", yaml: "extra:\n  a: [ok, \"${NOPE}\"]\n",
			errs: []string{`extra.a[1]: environment variable NOPE is not set (use ${NOPE:-} to allow empty)`}},
		{name: "any field duplicate key", yaml: "extra:\n  a: 1\n  a: 2\n",
			errs: []string{`extra: mapping key "a" already defined at line 2`}},
		{name: "explicit !!str tag", yaml: "notag: !!str 12\nptr: !!str 3\nhttp:\n  level: !!str null\n",
			check: func(t *testing.T, c *config) {
				assert.Equal(t, "12", c.NoTag)
				require.NotNil(t, c.Ptr)
				assert.Equal(t, 3, *c.Ptr)
			},
			errs: []string{`http.level: unknown level "null"; use debug or info`}},
		{name: "!!str null into a pointer is not nil", yaml: "extra: !!str null\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, "null", c.Extra) }},

		// Sequences of structs and defaults.
		{name: "SetDefaults on new slice elements", yaml: "broker:\n  listeners:\n    - name: a\n    - name: b\n      address: 0.0.0.0:1883\n",
			check: func(t *testing.T, c *config) {
				assert.Equal(t, []listener{
					{Name: "a", Address: "127.0.0.1:1883"},
					{Name: "b", Address: "0.0.0.0:1883"},
				}, c.Broker.Listeners)
			}},
		{name: "SetDefaults on new map values", yaml: "routes:\n  chef: {topic: chef/#}\n  ops: {topic: ops/#, qos: 0}\n  none:\n",
			check: func(t *testing.T, c *config) {
				assert.Equal(t, map[string]*route{
					"chef": {Topic: "chef/#", QoS: 1},
					"ops":  {Topic: "ops/#", QoS: 0},
					"none": nil,
				}, c.Routes)
			}},
		{name: "slice of structs replaces default elements", yaml: "broker:\n  users:\n    - name: alice\n",
			check: func(t *testing.T, c *config) {
				assert.Equal(t, []user{{Name: "alice", ACL: []string{"public/#"}}}, c.Broker.Users)
			}},
		{name: "errors in sequences name the index", yaml: "broker:\n  listeners:\n    - name: a\n    - nme: b\n",
			errs: []string{`broker.listeners[1].nme: unknown key (did you mean "name"?)`}},

		// Environment expansion.
		{name: "env var", yaml: "broker:\n  address: ${HOST}:${PORT}\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, "broker.local:9000", c.Broker.Address) }},
		{name: "env var into int, bool and duration", yaml: "broker:\n  max_queued: ${PORT}\ndebug: ${TRUE}\nhttp:\n  read_timeout: ${TIMEOUT}\n",
			check: func(t *testing.T, c *config) {
				assert.Equal(t, 9000, c.Broker.MaxQueued)
				assert.True(t, c.Debug)
				assert.Equal(t, 90*time.Second, c.HTTP.ReadTimeout)
			}},
		{name: "default when unset", yaml: "broker:\n  address: ${NOPE:-localhost:1883}\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, "localhost:1883", c.Broker.Address) }},
		{name: "default when empty", yaml: "broker:\n  address: ${EMPTY:-fallback}\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, "fallback", c.Broker.Address) }},
		{name: "default not used when set", yaml: "broker:\n  address: ${HOST:-fallback}\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, "broker.local", c.Broker.Address) }},
		{name: "empty default", yaml: "broker:\n  address: \"${NOPE:-}\"\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, "", c.Broker.Address) }},
		{name: "empty var without default is allowed", yaml: "broker:\n  address: x${EMPTY}y\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, "xy", c.Broker.Address) }},
		{name: "escaped dollar brace", yaml: "broker:\n  address: $${HOST}\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, "${HOST}", c.Broker.Address) }},
		{name: "bcrypt hash untouched", yaml: "broker:\n  users:\n    - password: $2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy\n",
			check: func(t *testing.T, c *config) {
				assert.Equal(t, "$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy", c.Broker.Users[0].Password)
			}},
		{name: "expanded values are not expanded again", yaml: "broker:\n  address: ${DOLLAR}\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, "${HOST}", c.Broker.Address) }},
		{name: "keys are not expanded", yaml: "tags:\n  ${HOST}: v\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, map[string]string{"${HOST}": "v"}, c.Tags) }},
		{name: "unset variable", yaml: "http:\n  tokens:\n    - name: chef\n      token: ${CHEF_TOKEN}\n    - name: other\n      token: ${OTHER_TOKEN}\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, "chef-secret", c.HTTP.Tokens[0].Token) },
			errs:  []string{`http.tokens[1].token: environment variable OTHER_TOKEN is not set (use ${OTHER_TOKEN:-} to allow empty)`}},
		{name: "every unset variable in a value", yaml: "broker:\n  address: ${A}:${B}\n",
			errs: []string{
				`broker.address: environment variable A is not set (use ${A:-} to allow empty)`,
				`broker.address: environment variable B is not set (use ${B:-} to allow empty)`,
			}},
		{name: "unterminated reference", yaml: "broker:\n  address: \"${HOST\"\n",
			errs: []string{`broker.address: unterminated ${HOST: add the closing } (or write $${ for a literal ${)`}},
		{name: "invalid variable name", yaml: "broker:\n  address: \"${1X}\"\n",
			errs: []string{`broker.address: invalid reference ${1X}: a variable name has letters, digits and _ and does not start with a digit (write $${ for a literal ${)`}},
		{name: "unset variable keeps the default", yaml: "broker:\n  max_queued: ${NOPE}\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, 1000, c.Broker.MaxQueued) },
			errs:  []string{`broker.max_queued: environment variable NOPE is not set (use ${NOPE:-} to allow empty)`}},
		{name: "env var with a bad value", yaml: "broker:\n  max_queued: ${HOST}\n",
			errs: []string{`broker.max_queued: expected an integer, got "broker.local"`}},

		// Secrets from files.
		{name: "token_file read and newline trimmed", yaml: "http:\n  token_file: /run/secrets/token\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, "file-token", c.HTTP.Token) }},
		{name: "token_file crlf trimmed", yaml: "http:\n  token_file: /run/secrets/crlf\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, "crlf-token", c.HTTP.Token) }},
		{name: "token_file only one newline trimmed", yaml: "http:\n  token_file: /run/secrets/two\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, "two\n", c.HTTP.Token) }},
		{name: "token_file without newline", yaml: "http:\n  token_file: /run/secrets/none\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, "plain", c.HTTP.Token) }},
		{name: "token_file path is expanded, content is not", yaml: "broker:\n  users:\n    - password_file: ${SECRETS:-/run/secrets}/bcrypt\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, "$2a$10$abc${X}", c.Broker.Users[0].Password) }},
		{name: "secret file in a list item", yaml: "broker:\n  users:\n    - name: a\n      password_file: /run/secrets/user\n",
			check: func(t *testing.T, c *config) {
				assert.Equal(t, []user{{Name: "a", Password: "hunter2", ACL: []string{"public/#"}}}, c.Broker.Users)
			}},
		{name: "both token and token_file", yaml: "http:\n  token: x\n  token_file: /run/secrets/token\n",
			errs: []string{`http.token_file: token and token_file are both set; remove one`}},
		{name: "both token_file and token", yaml: "http:\n  token_file: /run/secrets/token\n  token: x\n",
			errs: []string{`http.token: token_file and token are both set; remove one`}},
		{name: "missing secret file", yaml: "http:\n  token_file: /run/secrets/missing\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, "", c.HTTP.Token) },
			errs:  []string{`http.token_file: open /run/secrets/missing: file does not exist`}},
		{name: "empty secret file path", yaml: "http:\n  token_file: ${EMPTY}\n",
			errs: []string{`http.token_file: the file path is empty; give the path of the file that holds the secret`}},
		{name: "secret file path is a sequence", yaml: "http:\n  token_file: [a]\n",
			errs: []string{`http.token_file: expected a file path, got a sequence`}},
		{name: "secret file path from unset env", yaml: "http:\n  token_file: ${TOKEN_FILE}\n",
			errs: []string{`http.token_file: environment variable TOKEN_FILE is not set (use ${TOKEN_FILE:-} to allow empty)`}},
		{name: "_file on a non-secret field", yaml: "http:\n  address_file: /run/secrets/token\n",
			errs: []string{`http.address_file: unknown key (address is not a secret, so it cannot be read from a file; set address directly)`}},
		{name: "_file on an unknown field", yaml: "http:\n  nope_file: /run/secrets/token\n",
			errs: []string{`http.nope_file: unknown key; valid keys: address, level, read_timeout, token, token_file, tokens`}},

		// Aliases and merge keys.
		{name: "alias", yaml: "broker:\n  tls: &tls {cert_file: c.pem, key_file: k.pem}\n  listeners:\n    - tls: *tls\n",
			check: func(t *testing.T, c *config) {
				want := &tlsConfig{CertFile: "c.pem", KeyFile: "k.pem"}
				assert.Equal(t, want, c.Broker.TLS)
				assert.Equal(t, want, c.Broker.Listeners[0].TLS)
				assert.NotSame(t, c.Broker.TLS, c.Broker.Listeners[0].TLS)
			}},
		{name: "scalar alias", yaml: "broker:\n  address: &a host:1\nhttp:\n  address: *a\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, "host:1", c.HTTP.Address) }},
		{name: "errors through an alias name each use", yaml: "broker:\n  tls: &t {cert_fil: x}\n  listeners:\n    - tls: *t\n",
			errs: []string{
				`broker.tls.cert_fil: unknown key (did you mean "cert_file"?)`,
				`broker.listeners[0].tls.cert_fil: unknown key (did you mean "cert_file"?)`,
				`broker.listeners[0].tls.cert_file: must be set when tls is given`,
			}},
		{name: "merge key, explicit keys win", yaml: "broker:\n  listeners:\n    - &base {name: base, address: \"a:1\"}\n    - <<: *base\n      name: copy\n",
			check: func(t *testing.T, c *config) {
				assert.Equal(t, listener{Name: "copy", Address: "a:1"}, c.Broker.Listeners[1])
			}},
		{name: "merge key after explicit keys", yaml: "broker:\n  listeners:\n    - &base {name: base, address: \"a:1\"}\n    - name: copy\n      <<: *base\n",
			check: func(t *testing.T, c *config) {
				assert.Equal(t, listener{Name: "copy", Address: "a:1"}, c.Broker.Listeners[1])
			}},
		{name: "merge sequence, earlier mappings win", yaml: "tags:\n  <<: [{a: first, b: first}, {b: second, c: second}]\n  c: own\n",
			check: func(t *testing.T, c *config) {
				assert.Equal(t, map[string]string{"a": "first", "b": "first", "c": "own"}, c.Tags)
			}},
		{name: "nested merge", yaml: "broker:\n  <<: {<<: {address: deep, max_queued: 1}, max_queued: 2}\n",
			check: func(t *testing.T, c *config) {
				assert.Equal(t, "deep", c.Broker.Address)
				assert.Equal(t, 2, c.Broker.MaxQueued)
			}},
		{name: "merged keys are checked", yaml: "broker:\n  <<: {adress: x}\n",
			errs: []string{`broker.adress: unknown key (did you mean "address"?)`}},
		{name: "merge of a scalar", yaml: "broker:\n  <<: x\n",
			errs: []string{`broker.<<: expected a mapping or a sequence of mappings to merge, got "x"`}},
		{name: "merge of a sequence of scalars", yaml: "broker:\n  <<: [{address: a}, x]\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, "a", c.Broker.Address) },
			errs:  []string{`broker.<<: expected a mapping to merge, got "x"`}},
		{name: "merge into an any field", yaml: "extra:\n  <<: {a: 1}\n  b: 2\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, map[string]any{"a": 1, "b": 2}, c.Extra) }},
		{name: "quoted << is a plain key", yaml: "tags:\n  \"<<\": x\n",
			check: func(t *testing.T, c *config) { assert.Equal(t, map[string]string{"<<": "x"}, c.Tags) }},
		{name: "recursive merge", yaml: "broker: &b\n  <<: *b\n",
			errs: []string{`broker.<<: alias *b refers to a value that contains it; aliases cannot be recursive`}},
		{name: "recursive alias in an any field", yaml: "extra: &x {a: [*x]}\n",
			errs: []string{`extra: anchor 'x' value contains itself`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := defaultConfig()
			err := Decode([]byte(tt.yaml), &c, testOptions(env, files))
			assert.Equal(t, tt.errs, messages(t, err))
			if tt.check != nil {
				tt.check(t, &c)
			}
		})
	}
}

func TestDecodeLines(t *testing.T) {
	doc := `broker:
  adress: x
  max_queued: lots
  listeners:
    - name: a
      tls: {}
`
	c := defaultConfig()
	err := Decode([]byte(doc), &c, testOptions(nil, nil))
	var got []string
	for _, ke := range keyErrors(t, err) {
		got = append(got, ke.Key+"@"+strconv.Itoa(ke.Line))
	}
	assert.Equal(t, []string{
		"broker.adress@2",
		"broker.max_queued@3",
		"broker.listeners[0].tls.cert_file@0", // from Validate, the key is absent
	}, got)

	// A Validate problem about a key in the document gets its line.
	c = defaultConfig()
	err = Decode([]byte("broker:\n  listeners:\n    - {name: ok}\n    - name: bad\n"), &c, testOptions(nil, nil))
	kes := keyErrors(t, err)
	require.Len(t, kes, 1)
	assert.Equal(t, "broker.listeners[1]", kes[0].Key)
	assert.Equal(t, 4, kes[0].Line)
}

// TestManyProblems checks that every problem in a document is reported at
// once, in document order, followed by the Validate problems.
func TestManyProblems(t *testing.T) {
	doc := `broker:
  adress: 0.0.0.0:1883
  max_queued: lots
  listeners:
    - name: plain
    - name: secure
      tls:
        key_file: k.pem
  users:
    - name: alice
      password_file: /run/secrets/nope
      pasword: x
debug: yes
small: 300
http:
  address: [a]
  read_timeout: 10
  tokens:
    - name: chef
      token: ${CHEF_TOKEN}
  token: a
  token_file: /run/secrets/token
level: trace
hosts: {a: b}
extra: "${X"
unknown: 1
debug: true
`
	c := defaultConfig()
	err := Decode([]byte(doc), &c, testOptions(nil, map[string]string{"/run/secrets/token": "t\n"}))
	assert.Equal(t, []string{
		`broker.adress: unknown key (did you mean "address"?)`,
		`broker.max_queued: expected an integer, got "lots"`,
		`broker.users[0].password_file: open /run/secrets/nope: file does not exist`,
		`broker.users[0].pasword: unknown key (did you mean "password"?)`,
		`debug: expected true or false, got "yes"; use true instead`,
		`small: 300 is out of range (must be from -128 to 127)`,
		`http.address: expected a string, got a sequence`,
		`http.read_timeout: expected a duration, got "10" (use a unit, e.g. 10s)`,
		`http.tokens[0].token: environment variable CHEF_TOKEN is not set (use ${CHEF_TOKEN:-} to allow empty)`,
		`http.token_file: token and token_file are both set; remove one`,
		`level: unknown level "trace"; use debug or info`,
		`hosts: expected a sequence, got a mapping`,
		`extra: unterminated ${X: add the closing } (or write $${ for a literal ${)`,
		`unknown: unknown key; valid keys: broker, debug, extra, hosts, http, instance, level, notag, pair, port, ptr, ratio, routes, small, tags`,
		`debug: duplicate key (first given on line 13); remove one`,
		`broker.listeners[1].tls.cert_file: must be set when tls is given`,
	}, messages(t, err))
	// Valid keys were still decoded.
	assert.Equal(t, "secure", c.Broker.Listeners[1].Name)
	assert.Equal(t, "k.pem", c.Broker.Listeners[1].TLS.KeyFile)
	assert.Equal(t, "a", c.HTTP.Token)
}

func TestSecretFromRealFile(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(name, []byte("disk-token\n"), 0o600))
	t.Setenv("STRICTYAML_TEST_DIR", dir)

	var c config
	err := Decode([]byte("http:\n  token_file: ${STRICTYAML_TEST_DIR}/token\n"), &c, Options{})
	require.NoError(t, err)
	assert.Equal(t, "disk-token", c.HTTP.Token)

	missing := filepath.Join(dir, "missing")
	err = Decode([]byte("http:\n  token_file: "+missing+"\n"), &c, Options{})
	assert.Equal(t, []string{"http.token_file: open " + missing + ": no such file or directory"}, messages(t, err))
	var pe *fs.PathError
	assert.True(t, errors.As(err, &pe), "the file error is wrapped, not flattened")
	assert.True(t, errors.Is(err, fs.ErrNotExist))
}

func TestSecretTextUnmarshaler(t *testing.T) {
	type cfg struct {
		Level level   `yaml:"level" secret:"true"`
		Key   *string `yaml:"key" secret:"true"`
	}
	var c cfg
	err := Decode([]byte("level_file: /l\nkey_file: /k\n"), &c, testOptions(nil, map[string]string{"/l": "debug\n", "/k": "k\n"}))
	require.NoError(t, err)
	assert.Equal(t, level(1), c.Level)
	require.NotNil(t, c.Key)
	assert.Equal(t, "k", *c.Key)

	// A bad secret is reported at the _file key and its content is not shown.
	type num struct {
		N int `yaml:"n" secret:"true"`
	}
	var n num
	err = Decode([]byte("n_file: /n\n"), &n, testOptions(nil, map[string]string{"/n": "hunter2"}))
	assert.Equal(t, []string{`n_file: expected an integer, got the file's content (not shown)`}, messages(t, err))
}

func TestDefaultLookupEnv(t *testing.T) {
	t.Setenv("STRICTYAML_TEST_HOST", "envhost")
	var c config
	require.NoError(t, Decode([]byte("broker:\n  address: ${STRICTYAML_TEST_HOST}\n"), &c, Options{}))
	assert.Equal(t, "envhost", c.Broker.Address)
}

func TestDecodeBadTarget(t *testing.T) {
	for _, out := range []any{nil, config{}, (*config)(nil)} {
		err := Decode([]byte("a: 1"), out, Options{})
		msgs := messages(t, err)
		require.Len(t, msgs, 1)
		assert.Contains(t, msgs[0], "strictyaml: Decode needs a non-nil pointer to a struct")
	}
}

// tree is a recursive type, for recursive aliases.
type tree struct {
	Name     string  `yaml:"name"`
	Children []*tree `yaml:"children"`
}

func TestRecursiveAlias(t *testing.T) {
	var tr tree
	err := Decode([]byte("&root\nname: r\nchildren: [*root]\n"), &tr, Options{})
	assert.Equal(t, []string{`children[0]: alias *root refers to a value that contains it; aliases cannot be recursive`}, messages(t, err))

	// A non-recursive alias to a sibling is fine.
	tr = tree{}
	err = Decode([]byte("name: r\nchildren:\n  - &leaf {name: leaf}\n  - *leaf\n"), &tr, Options{})
	require.NoError(t, err)
	require.Len(t, tr.Children, 2)
	assert.Equal(t, "leaf", tr.Children[1].Name)
}

func TestAliasBomb(t *testing.T) {
	// Each level multiplies the work by 10; nine levels would be 10^9 nodes.
	var b strings.Builder
	b.WriteString("name: bomb\nchildren:\n  - &l0 {name: x}\n")
	for i := 1; i <= 9; i++ {
		b.WriteString("  - &l" + string(rune('0'+i)) + " {children: [")
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*l" + string(rune('0'+i-1)))
		}
		b.WriteString("]}\n")
	}
	var tr tree
	var err error
	// The work budget, not the expansion, bounds the work: about 245,000
	// allocations, the same for five levels as for nine. Counted, not
	// timed, since a busy machine stretches the time many times over.
	n := mallocs(func() { err = Decode([]byte(b.String()), &tr, Options{}) })
	msgs := messages(t, err)
	require.NotEmpty(t, msgs)
	assert.Contains(t, msgs[0], "the document is too large once its aliases are expanded; use fewer aliases")
	assert.Less(t, n, uint64(1_000_000), "allocations")
}

// mallocs counts the heap allocations fn makes.
func mallocs(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs
}

func TestAliasBombOfUnknownKeys(t *testing.T) {
	// 1000 aliases to a mapping of 1000 unknown keys would be a million
	// errors.
	var b strings.Builder
	b.WriteString("extra: &big {")
	for i := 0; i < 1000; i++ {
		b.WriteString("k" + strconv.Itoa(i) + ": 1, ")
	}
	b.WriteString("}\nroutes:\n")
	for i := 0; i < 1000; i++ {
		b.WriteString("  r" + strconv.Itoa(i) + ": *big\n")
	}
	c := defaultConfig()
	var err error
	// About 1.25 million allocations once the budget stops it, where a
	// million errors would take about 9 million. Counted, not timed.
	n := mallocs(func() { err = Decode([]byte(b.String()), &c, Options{}) })
	msgs := messages(t, err)
	assert.Less(t, len(msgs), 200_000)
	last := msgs[len(msgs)-1]
	assert.True(t, strings.HasPrefix(last, "routes.r"), last)
	assert.True(t, strings.HasSuffix(last, ": the document is too large once its aliases are expanded; use fewer aliases"), last)
	assert.Less(t, n, uint64(4_000_000), "allocations")
}

func TestDecodeIntoNestedPointers(t *testing.T) {
	type inner struct {
		A int `yaml:"a"`
	}
	type outer struct {
		P **inner `yaml:"p"`
	}
	var o outer
	require.NoError(t, Decode([]byte("p: {a: 1}\n"), &o, Options{}))
	require.NotNil(t, o.P)
	assert.Equal(t, 1, (**o.P).A)

	// A non-nil default pointer is decoded into, keeping its other fields.
	type def struct {
		T *tlsConfig `yaml:"t"`
	}
	d := def{T: &tlsConfig{CertFile: "default.pem", KeyFile: "default.key"}}
	require.NoError(t, Decode([]byte("t: {key_file: k}\n"), &d, Options{}))
	assert.Equal(t, &tlsConfig{CertFile: "default.pem", KeyFile: "k"}, d.T)
}

func TestSetDefaultsOnNewPointer(t *testing.T) {
	type cfg struct {
		L *listener `yaml:"l"`
	}
	var c cfg
	require.NoError(t, Decode([]byte("l: {name: x}\n"), &c, Options{}))
	assert.Equal(t, &listener{Name: "x", Address: "127.0.0.1:1883"}, c.L)
}

func TestStructTypeProblems(t *testing.T) {
	type dup struct {
		A string `yaml:"a"`
		B string `yaml:"a"`
	}
	var d dup
	err := Decode([]byte("a: x\n"), &d, Options{})
	assert.Equal(t, []string{`strictyaml: type strictyaml.dup has key "a" twice (fields A and B)`}, messages(t, err))

	type badInline struct {
		M map[string]string `yaml:",inline"`
	}
	var b badInline
	err = Decode([]byte("{}"), &b, Options{})
	assert.Equal(t, []string{`strictyaml: field strictyaml.badInline.M: inline needs a struct, not map[string]string`}, messages(t, err))

	type clash struct {
		T  string `yaml:"t" secret:"true"`
		TF string `yaml:"t_file"`
	}
	var cl clash
	err = Decode([]byte("{}"), &cl, Options{})
	assert.Equal(t, []string{`strictyaml: type strictyaml.clash: key "t_file" clashes with the file form of secret "t"`}, messages(t, err))

	type unsupported struct {
		C chan int `yaml:"c"`
	}
	var u unsupported
	err = Decode([]byte("c: 1\n"), &u, Options{})
	assert.Equal(t, []string{`c: strictyaml: cannot decode into Go type chan int`}, messages(t, err))
}

// Inline forms: an embedded struct, a named struct field, and an unexported
// embedded struct.
type inlineBase struct {
	ID string `yaml:"id"`
}

type inlineNamed struct {
	Zone string `yaml:"zone"`
}

type inlineHidden struct {
	Secret string `yaml:"hidden"`
}

type inlineAll struct {
	inlineBase   `yaml:",inline"`
	Named        inlineNamed `yaml:",inline"`
	inlineHidden `yaml:",inline"`
	Own          int `yaml:"own"`
}

func TestInline(t *testing.T) {
	var c inlineAll
	require.NoError(t, Decode([]byte("id: a\nzone: z\nhidden: h\nown: 1\n"), &c, Options{}))
	assert.Equal(t, inlineAll{inlineBase: inlineBase{ID: "a"}, Named: inlineNamed{Zone: "z"}, inlineHidden: inlineHidden{Secret: "h"}, Own: 1}, c)

	err := Decode([]byte("named: {}\n"), &c, Options{})
	assert.Equal(t, []string{`named: unknown key; valid keys: hidden, id, own, zone`}, messages(t, err))
}

func TestAnyWithNamedEmptyInterface(t *testing.T) {
	type anything interface{}
	type cfg struct {
		X anything `yaml:"x"`
		S fmtStringer
	}
	var c cfg
	require.NoError(t, Decode([]byte("x: [1]\n"), &c, Options{}))
	assert.Equal(t, []any{1}, c.X)
	err := Decode([]byte("s: x\n"), &c, Options{})
	assert.Equal(t, []string{`s: strictyaml: cannot decode into Go type strictyaml.fmtStringer (only empty interfaces are supported)`}, messages(t, err))
}

type fmtStringer interface{ String() string }

func TestKeyError(t *testing.T) {
	inner := errors.New("boom")
	ke := &KeyError{Key: "a.b", Line: 3, Err: inner}
	assert.Equal(t, "a.b: boom", ke.Error())
	assert.Same(t, inner, errors.Unwrap(ke))
	assert.Equal(t, "boom", (&KeyError{Err: inner}).Error())
	assert.Equal(t, "a: invalid value", (&KeyError{Key: "a"}).Error())
}

func TestDecodeDoesNotTouchUnrelatedFields(t *testing.T) {
	c := defaultConfig()
	c.Ignored = "keep"
	require.NoError(t, Decode([]byte("debug: true\n"), &c, Options{}))
	assert.Equal(t, "keep", c.Ignored)
	assert.True(t, reflect.DeepEqual(defaultConfig().Broker, c.Broker))
}
