package configcli

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzParseValue: any text parsed as YAML or JSON either is refused with an
// error or becomes a JSON value that survives the trip through JSON, which
// is how it travels to the API.
func FuzzParseValue(f *testing.F) {
	for _, seed := range []struct{ data, format string }{
		{"deployment_id: 1\nnodes:\n  - fqdn: node-1\n    role: primary-controller\n", "yaml"},
		{"{1: a, true: b, ~: c, 1.5: d}", "yaml"},
		{"when: 2020-01-01\nratio: .inf\n", "yaml"},
		{"a: &x [1, 2]\nb: *x\n<<: {c: 3}\n", "yaml"},
		{"--- 1\n--- 2\n", "yaml"},
		{`{"big": 12345678901234567890, "f": 1.50, "s": "\u00e9"}`, "json"},
		{`[1, "two", null]`, "json"},
		{"not: [closed", "yaml"},
		{"", "yaml"},
	} {
		f.Add(seed.data, seed.format)
	}
	f.Fuzz(func(t *testing.T, data, format string) {
		v, err := parseValue([]byte(data), format, nil)
		if err != nil {
			return
		}
		once, err := json.Marshal(v)
		if err != nil {
			return // such as .inf, which JSON cannot hold: the CLI reports it
		}
		back, err := parseValue(once, "json", nil)
		if err != nil {
			t.Fatalf("%q (%s) -> %s, which does not parse back: %v", data, format, once, err)
		}
		twice, err := json.Marshal(back)
		if err != nil || !bytes.Equal(once, twice) {
			t.Fatalf("%q (%s) -> %s -> %s (%v)", data, format, once, twice, err)
		}
	})
}
