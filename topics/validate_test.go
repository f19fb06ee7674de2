package topics

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidName(t *testing.T) {
	ok := []string{
		"a", "chef/org/node/run/start", "/", "//", "/a", "a/", "a//b", "$SYS/broker/uptime",
		"a b", "nœud/日本", "a.b", "*", ">", "%2F", strings.Repeat("a", MaxTopicBytes),
	}
	for _, s := range ok {
		assert.NoError(t, ValidName(s), "%q", s)
	}
	bad := []struct{ in, msg string }{
		{"", "invalid topic name: empty"},
		{strings.Repeat("a", MaxTopicBytes+1), "invalid topic name: 65536 bytes, limit 65535"},
		{"a\x00b", "invalid topic name: NUL at byte 1"},
		{"a/\xff", "invalid topic name: not valid UTF-8"},
		{"\xed\xa0\x80", "invalid topic name: not valid UTF-8"},
		{"a/+", "invalid topic name: wildcard '+' at byte 2"},
		{"#", "invalid topic name: wildcard '#' at byte 0"},
		{"a+b", "invalid topic name: wildcard '+' at byte 1"},
	}
	for _, tt := range bad {
		err := ValidName(tt.in)
		require.ErrorIs(t, err, ErrInvalidName, "%q", tt.in)
		assert.EqualError(t, err, tt.msg)
	}
}

func TestValidFilter(t *testing.T) {
	ok := []string{
		"a", "#", "+", "+/+", "/+", "a/#", "a/+/b", "+/#", "sport/tennis/player1/#", "$SYS/#",
		"a//b", "/", "a/", "$share/group/a/+/#", "$share/g/#", "$share/g//", "$share", "$sharex/a",
		"$share/g/$share/h/x", "$SYS/monitor/+", strings.Repeat("a", MaxTopicBytes),
	}
	for _, s := range ok {
		assert.NoError(t, ValidFilter(s), "%q", s)
	}
	bad := []struct{ in, msg string }{
		{"", "invalid topic filter: empty"},
		{strings.Repeat("a", MaxTopicBytes+1), "invalid topic filter: 65536 bytes, limit 65535"},
		{"a\x00", "invalid topic filter: NUL at byte 1"},
		{"\xff/#", "invalid topic filter: not valid UTF-8"},
		{"a+", "invalid topic filter: '+' at byte 1 must be a whole level"},
		{"+a", "invalid topic filter: '+' at byte 0 must be a whole level"},
		{"a/++/b", "invalid topic filter: '+' at byte 2 must be a whole level"},
		{"a#", "invalid topic filter: '#' at byte 1 must be a whole level"},
		{"#/a", "invalid topic filter: '#' must be the last level"},
		{"a/#/", "invalid topic filter: '#' must be the last level"},
		{"a/##", "invalid topic filter: '#' must be the last level"},
		{"sport/tennis#", "invalid topic filter: '#' at byte 12 must be a whole level"},
		{"$share/", "invalid topic filter: a shared subscription needs the form $share/<group>/<filter>"},
		{"$share/group", "invalid topic filter: a shared subscription needs the form $share/<group>/<filter>"},
		{"$share//a", "invalid topic filter: empty shared subscription group"},
		{"$share/g+/a", `invalid topic filter: shared subscription group "g+" contains a wildcard`},
		{"$share/#/a", `invalid topic filter: shared subscription group "#" contains a wildcard`},
		{"$share/g/", `in shared subscription "g": invalid topic filter: empty`},
		{"$share/g/a#", `in shared subscription "g": invalid topic filter: '#' at byte 1 must be a whole level`},
	}
	for _, tt := range bad {
		err := ValidFilter(tt.in)
		require.ErrorIs(t, err, ErrInvalidFilter, "%q", tt.in)
		assert.EqualError(t, err, tt.msg)
	}
}

func TestSplitShared(t *testing.T) {
	tests := []struct {
		in, group, inner string
		ok               bool
	}{
		{"$share/firehose/chef/#", "firehose", "chef/#", true},
		{"$share/g/a/b", "g", "a/b", true},
		{"$share//a", "", "a", true},
		{"$share/g/", "g", "", true},
		{"$share/g", "", "", false},
		{"$share", "", "", false},
		{"chef/#", "", "", false},
		{"$SHARE/g/a", "", "", false},
	}
	for _, tt := range tests {
		group, inner, ok := SplitShared(tt.in)
		assert.Equal(t, tt.ok, ok, tt.in)
		assert.Equal(t, tt.group, group, tt.in)
		assert.Equal(t, tt.inner, inner, tt.in)
	}
}

func TestValidPrefix(t *testing.T) {
	for _, s := range []string{"chef", "gearman-subunit", "ops/chef", "a/b/c", "dc1.chef", "nœud"} {
		assert.NoError(t, ValidPrefix(s), s)
	}
	bad := []struct{ in, msg string }{
		{"", "invalid topic prefix: empty"},
		{"$SYS", "invalid topic prefix: must not start with '$', which is reserved for the broker"},
		{"/chef", "invalid topic prefix: empty level at byte 0"},
		{"chef/", "invalid topic prefix: empty level at byte 4"},
		{"a//b", "invalid topic prefix: empty level at byte 1"},
		{"/", "invalid topic prefix: empty level at byte 0"},
		{"chef/+", "invalid topic prefix: wildcard '+' at byte 5"},
		{"#", "invalid topic prefix: wildcard '#' at byte 0"},
		{"ch\x00ef", "invalid topic prefix: NUL at byte 2"},
		{"chef\n", "invalid topic prefix: control character '\\n' at byte 4"},
		{"\xff", "invalid topic prefix: not valid UTF-8"},
	}
	for _, tt := range bad {
		err := ValidPrefix(tt.in)
		require.ErrorIs(t, err, ErrInvalidPrefix, "%q", tt.in)
		assert.EqualError(t, err, tt.msg)
	}
}
