package strictyaml

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestExpandEnv(t *testing.T) {
	env := map[string]string{"A": "alpha", "EMPTY": "", "B_2": "b", "REF": "${A}"}
	lookup := func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
	tests := []struct {
		in   string
		want string
		errs []string
	}{
		{in: "", want: ""},
		{in: "plain", want: "plain"},
		{in: "${A}", want: "alpha"},
		{in: "x${A}y${B_2}z", want: "xalphaybz"},
		{in: "${_}", errs: []string{"environment variable _ is not set (use ${_:-} to allow empty)"}},
		{in: "${EMPTY}", want: ""},
		{in: "${NOPE:-d}", want: "d"},
		{in: "${EMPTY:-d}", want: "d"},
		{in: "${A:-d}", want: "alpha"},
		{in: "${NOPE:-}", want: ""},
		{in: "${NOPE:-a:-b $ { x}", want: "a:-b $ { x"},
		{in: "${REF}", want: "${A}"},
		{in: "$${A}", want: "${A}"},
		{in: "$$${A}", want: "$${A}"},
		{in: "$${A}${A}", want: "${A}alpha"},
		{in: "$", want: "$"},
		{in: "$A", want: "$A"},
		{in: "a$", want: "a$"},
		{in: "$$", want: "$$"},
		{in: "cost: $5 {x}", want: "cost: $5 {x}"},
		{in: "$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy", want: "$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy"},
		{in: "${NOPE}", errs: []string{"environment variable NOPE is not set (use ${NOPE:-} to allow empty)"}},
		{in: "${X}-${Y}", errs: []string{
			"environment variable X is not set (use ${X:-} to allow empty)",
			"environment variable Y is not set (use ${Y:-} to allow empty)",
		}},
		{in: "${A", errs: []string{"unterminated ${A: add the closing } (or write $${ for a literal ${)"}},
		{in: "x ${A:-def", errs: []string{"unterminated ${A:-def: add the closing } (or write $${ for a literal ${)"}},
		{in: "${}", errs: []string{"invalid reference ${}: a variable name has letters, digits and _ and does not start with a digit (write $${ for a literal ${)"}},
		{in: "${9A}", errs: []string{"invalid reference ${9A}: a variable name has letters, digits and _ and does not start with a digit (write $${ for a literal ${)"}},
		{in: "${A B}", errs: []string{"invalid reference ${A B}: a variable name has letters, digits and _ and does not start with a digit (write $${ for a literal ${)"}},
		{in: "${A-x}", errs: []string{"invalid reference ${A-x}: a variable name has letters, digits and _ and does not start with a digit (write $${ for a literal ${)"}},
		{in: "${A:x}", errs: []string{"invalid reference ${A:x}: a variable name has letters, digits and _ and does not start with a digit (write $${ for a literal ${)"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, errs := expandEnv(tt.in, lookup)
			var msgs []string
			for _, err := range errs {
				msgs = append(msgs, err.Error())
			}
			assert.Equal(t, tt.errs, msgs)
			if tt.errs == nil {
				assert.Equal(t, tt.want, got)
			}
		})
	}
}

func TestClip(t *testing.T) {
	assert.Equal(t, "short", clip("short"))
	long := fmt.Sprintf("%050d", 0)
	assert.Equal(t, long[:37]+"…", clip(long))
	// Multi-byte characters are not cut in half.
	s := "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" + "é" + "bbbbbbbb"
	assert.Equal(t, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa…", clip(s))
}

func TestKeyPath(t *testing.T) {
	tests := []struct{ parent, key, want string }{
		{"", "broker", "broker"},
		{"broker", "address", "broker.address"},
		{"tags", "a.b", `tags["a.b"]`},
		{"tags", "a[0]", `tags["a[0]"]`},
		{"tags", "a b", `tags["a b"]`},
		{"tags", "", `tags[""]`},
		{"tags", `say "hi"`, `tags["say \"hi\""]`},
		{"tags", "tab\there", `tags["tab\there"]`},
		{"", "a.b", `["a.b"]`},
		{"tags", "ünïcode", "tags.ünïcode"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, keyPath(tt.parent, tt.key))
	}
	assert.Equal(t, "listeners[3]", indexPath("listeners", 3))
}

func TestSuggest(t *testing.T) {
	valid := []string{"address", "id", "max_queued", "tls", "users"}
	tests := []struct{ key, want string }{
		{"adress", "address"},
		{"addresss", "address"},
		{"ADDRESS", "address"},
		{"Max_Queued", "max_queued"},
		{"max-queued", "max_queued"},
		{"tsl", "tls"},
		{"user", "users"},
		{"whatever", ""},
		{"maxqueue", "max_queued"},
		{"queue", ""},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, suggest(tt.key, valid), tt.key)
	}
	assert.Equal(t, 0, editDistance("", ""))
	assert.Equal(t, 3, editDistance("abc", ""))
	assert.Equal(t, 2, editDistance("tsl", "tls"))
	assert.Equal(t, 1, editDistance("adress", "address"))
}
