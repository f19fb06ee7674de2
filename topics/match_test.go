package topics

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

var matchTests = []struct {
	filter, topic string
	want          bool
}{
	// MQTT 3.1.1 section 4.7.1.2, multi-level wildcard.
	{"sport/tennis/player1/#", "sport/tennis/player1", true},
	{"sport/tennis/player1/#", "sport/tennis/player1/ranking", true},
	{"sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon", true},
	{"sport/tennis/player1/#", "sport/tennis/player2", false},
	{"sport/tennis/player1/#", "sport/tennis", false},
	{"sport/#", "sport", true},
	{"#", "sport/tennis/player1", true},
	// Section 4.7.1.3, single-level wildcard.
	{"sport/tennis/+", "sport/tennis/player1", true},
	{"sport/tennis/+", "sport/tennis/player2", true},
	{"sport/tennis/+", "sport/tennis/player1/ranking", false},
	{"sport/+", "sport", false},
	{"sport/+", "sport/", true},
	{"+", "sport", true},
	{"+/tennis/#", "sport/tennis/player1", true},
	{"sport/+/player1", "sport/tennis/player1", true},
	{"+/+", "/finance", true},
	{"/+", "/finance", true},
	{"+", "/finance", false},
	// Section 4.7.2, topics beginning with '$'.
	{"#", "$SYS/broker/uptime", false},
	{"+/monitor/Clients", "$SYS/monitor/Clients", false},
	{"$SYS/#", "$SYS/monitor/Clients", true},
	{"$SYS/#", "$SYS", true},
	{"$SYS/monitor/+", "$SYS/monitor/Clients", true},
	{"+", "$SYS", false},
	{"+/#", "$SYS/x", false},
	{"#", "$", false},
	{"a/+", "a/$b", true},
	{"#", "a$", true},
	{"$SYS/+", "$SYS/broker", true},
	// Section 4.7.3, case and spaces are significant.
	{"ACCOUNTS", "Accounts", false},
	{"Accounts payable", "Accounts payable", true},
	// Empty levels.
	{"a/+/b", "a//b", true},
	{"a//b", "a//b", true},
	{"a//b", "a/b", false},
	{"a/b", "a//b", false},
	{"+/a", "/a", true},
	{"#", "/a", true},
	{"/#", "/a", true},
	{"/#", "/", true},
	{"a/+", "a/", true},
	{"a/#", "a/", true},
	{"a", "a/", false},
	{"a/", "a", false},
	{"+/+", "/", true},
	{"+", "/", false},
	{"+/+/+", "//", true},
	{"//#", "//", true},
	// Plain levels and lengths.
	{"a/b", "a/b", true},
	{"a/b", "a/b/c", false},
	{"a/b/c", "a/b", false},
	{"+/+", "a", false},
	{"a/b/#", "a/b/c/d/e", true},
	{"a/+/c/#", "a/b/c", true},
	{"a/+/c/#", "a/b/d", false},
	{"chef/+/+/run/#", "chef/org/node/run/success", true},
	{"chef/+/+/run/#", "chef/org/node/status", false},
	// Escaped levels are plain text to the matcher.
	{"gerrit/openstack/+/comment-added", "gerrit/openstack/nova/comment-added", true},
	{"ansible/playbook/+/stats/+", "ansible/playbook/u/stats/web%2F01", true},
	{"ansible/playbook/+/stats/web", "ansible/playbook/u/stats/web%2F01", false},
}

func TestMatch(t *testing.T) {
	assert.GreaterOrEqual(t, len(matchTests), 40)
	for _, tt := range matchTests {
		assert.Equal(t, tt.want, Match(tt.filter, tt.topic), "Match(%q, %q)", tt.filter, tt.topic)
		assert.Equal(t, tt.want, refMatch(tt.filter, tt.topic), "refMatch(%q, %q)", tt.filter, tt.topic)
		if ValidName(tt.topic) == nil {
			assert.Equal(t, tt.want, Overlap(tt.filter, tt.topic), "Overlap(%q, %q)", tt.filter, tt.topic)
			assert.Equal(t, tt.want, Overlap(tt.topic, tt.filter), "Overlap(%q, %q)", tt.topic, tt.filter)
		}
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		_ = Match("chef/+/+/resource/#", "chef/org/node/resource/apache2/updated")
		_ = Overlap("chef/+/+/resource/#", "chef/org/+/resource/apache2/+")
	})
	assert.Zero(t, allocs)
}

func TestOverlap(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"a/+", "a/b", true},
		{"a/+", "b/+", false},
		{"a/#", "a", true},
		{"a/+", "a", false},
		{"#", "$SYS/x", false},
		{"$SYS/#", "#", false},
		{"$SYS/#", "+/x", false},
		{"$SYS/#", "$SYS/+", true},
		{"+/b", "a/+", true},
		{"+/b/c", "a/+/d", false},
		{"#", "+", true},
		{"#", "#", true},
		{"+", "+", true},
		{"a/#", "#", true},
		{"a/b/#", "a/+/c", true},
		{"+", "+/+", false},
		{"+/#", "+", true},
		{"a//b", "a/+/b", true},
		{"/+", "+/x", true},
		{"/+", "+", false},
		{"+", "$", false},
		{"$a", "$a", true},
		{"$a/+", "$a/#", true},
		{"a/+/#", "a", false},
		{"a/+/#", "a/b", true},
		{"chef/+/+/run/+", "chef/myorg/#", true},
		{"chef/+/+/run/+", "ansible/#", false},
		{"+/+/+", "a/b/c/d", false},
		{"+/+/+", "a/b/c/#", true},
		{"a/b", "a/b/#", true},
		{"a/b", "a/b/+", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Overlap(tt.a, tt.b), "Overlap(%q, %q)", tt.a, tt.b)
		assert.Equal(t, tt.want, Overlap(tt.b, tt.a), "Overlap(%q, %q)", tt.b, tt.a)
		w, ok := overlapWitness(tt.a, tt.b)
		assert.Equal(t, tt.want, ok, "overlapWitness(%q, %q)", tt.a, tt.b)
		if ok {
			assert.True(t, Match(tt.a, w) && Match(tt.b, w), "witness %q of %q and %q", w, tt.a, tt.b)
		}
	}
}

// refMatch is a plain, allocating matcher written from the MQTT text, to check
// Match against.
func refMatch(filter, topic string) bool {
	f := strings.Split(filter, "/")
	n := strings.Split(topic, "/")
	if strings.HasPrefix(topic, "$") && (f[0] == "+" || f[0] == "#") {
		return false
	}
	for i, fl := range f {
		if fl == "#" {
			return true
		}
		if i >= len(n) {
			return false
		}
		if fl != "+" && fl != n[i] {
			return false
		}
	}
	return len(f) == len(n)
}

// overlapWitness builds a topic name matched by both filters, if there is one.
// It is a second, constructive answer to Overlap: the tests check that the
// topic really matches both filters with Match.
func overlapWitness(a, b string) (string, bool) {
	fa, fb := strings.Split(a, "/"), strings.Split(b, "/")
	var levels []string
	for i := 0; ; i++ {
		switch {
		case i == len(fa) && i == len(fb):
			return strings.Join(levels, "/"), witnessOK(a, b, levels)
		case i == len(fa) || i == len(fb):
			rest := fb[i:]
			if i == len(fb) {
				rest = fa[i:]
			}
			if len(rest) == 1 && rest[0] == "#" {
				return strings.Join(levels, "/"), witnessOK(a, b, levels)
			}
			return "", false
		}
		x, y := fa[i], fb[i]
		switch {
		case x == "#" || y == "#":
			// Take the other filter's remainder, with "x" for wildcards.
			other := fb[i:]
			if x != "#" {
				other = fa[i:]
			}
			for _, l := range other {
				switch l {
				case "#":
				case "+":
					levels = append(levels, "x")
				default:
					levels = append(levels, l)
				}
			}
			// Only both ending in '#' lets the witness grow, which it
			// must when it would otherwise be the empty string.
			if strings.Join(levels, "/") == "" && other[len(other)-1] == "#" {
				levels = append(levels, "x")
			}
			return strings.Join(levels, "/"), witnessOK(a, b, levels)
		case x == "+" && y == "+":
			levels = append(levels, "x")
		case x == "+":
			levels = append(levels, y)
		case y == "+" || x == y:
			levels = append(levels, x)
		default:
			return "", false
		}
	}
}

// witnessOK applies the '$' rule and the non-empty rule to a candidate.
func witnessOK(a, b string, levels []string) bool {
	t := strings.Join(levels, "/")
	return t != "" && refMatch(a, t) && refMatch(b, t)
}

func FuzzMatch(f *testing.F) {
	for _, tt := range matchTests {
		f.Add(tt.filter, tt.topic, uint8(0))
	}
	f.Add("a/+/#", "a/b/c", uint8(1))
	f.Add("#", "$SYS/x", uint8(2))
	f.Add("", "", uint8(0))
	f.Add("a//", "/", uint8(3))
	// Found by TestMatchExhaustive: the only common match is "", which is
	// not a topic name, so these do not overlap.
	f.Add("+", "/#", uint8(0))
	f.Add("#", "/#", uint8(0))
	f.Fuzz(func(t *testing.T, filter, topic string, pick uint8) {
		// Never panics, whatever the input.
		got := Match(filter, topic)
		_ = Overlap(filter, topic)
		_ = Overlap(topic, filter)

		plain := !strings.HasPrefix(filter, sharePrefix)
		if ValidFilter(filter) == nil && plain && ValidFilter(topic) == nil && !strings.HasPrefix(topic, sharePrefix) {
			// Both are filters: Overlap must agree with a constructed witness.
			o := Overlap(filter, topic)
			if o != Overlap(topic, filter) {
				t.Fatalf("Overlap(%q, %q) = %v is not symmetric", filter, topic, o)
			}
			w, ok := overlapWitness(filter, topic)
			if o != ok || (ok && (ValidName(w) != nil || !Match(filter, w) || !Match(topic, w))) {
				t.Fatalf("Overlap(%q, %q) = %v, witness %q, %v", filter, topic, o, w, ok)
			}
		}

		if ValidName(topic) != nil {
			return
		}
		if ValidFilter(filter) == nil && plain {
			if want := refMatch(filter, topic); got != want {
				t.Fatalf("Match(%q, %q) = %v, reference says %v", filter, topic, got, want)
			}
			if o := Overlap(filter, topic); o != got {
				t.Fatalf("Overlap(%q, %q) = %v, Match = %v", filter, topic, o, got)
			}
			if o := Overlap(topic, filter); o != got {
				t.Fatalf("Overlap(%q, %q) = %v, Match = %v", topic, filter, o, got)
			}
			w, ok := overlapWitness(filter, topic)
			if ok != got || (ok && (w != topic || !Match(filter, w))) {
				t.Fatalf("overlapWitness(%q, %q) = %q, %v; Match = %v", filter, topic, w, ok, got)
			}
		}

		levels := strings.Split(topic, "/")
		i := int(pick) % len(levels)
		hidden := i == 0 && strings.HasPrefix(topic, "$")

		plus := append([]string(nil), levels...)
		plus[i] = "+"
		pf := strings.Join(plus, "/")
		if Match(pf, topic) == hidden {
			t.Fatalf("Match(%q, %q) = %v, want %v", pf, topic, !hidden, !hidden)
		}
		if Overlap(pf, topic) == hidden {
			t.Fatalf("Overlap(%q, %q) = %v, want %v", pf, topic, !hidden, !hidden)
		}

		hf := strings.Join(append(levels[:i:i], "#"), "/")
		if Match(hf, topic) == hidden {
			t.Fatalf("Match(%q, %q) = %v, want %v", hf, topic, !hidden, !hidden)
		}

		// Two filters that both match a topic overlap.
		if ValidFilter(filter) == nil && plain && got && Match(pf, topic) && !Overlap(filter, pf) {
			t.Fatalf("Overlap(%q, %q) = false, but both match %q", filter, pf, topic)
		}
	})
}

func BenchmarkMatchExact(b *testing.B) {
	for b.Loop() {
		_ = Match("chef/myorg/web01/resource/apache2/updated", "chef/myorg/web01/resource/apache2/updated")
	}
}

func BenchmarkMatchPlus(b *testing.B) {
	for b.Loop() {
		_ = Match("chef/+/+/resource/+/updated", "chef/myorg/web01/resource/apache2/updated")
	}
}

func BenchmarkMatchHash(b *testing.B) {
	for b.Loop() {
		_ = Match("chef/myorg/#", "chef/myorg/web01/resource/apache2/updated")
	}
}

func BenchmarkMatchMiss(b *testing.B) {
	for b.Loop() {
		_ = Match("ansible/playbook/+/task/+/FAILED", "chef/myorg/web01/resource/apache2/updated")
	}
}

func BenchmarkMatchDollar(b *testing.B) {
	for b.Loop() {
		_ = Match("#", "$SYS/broker/clients/connected")
	}
}

func BenchmarkOverlap(b *testing.B) {
	for b.Loop() {
		_ = Overlap("chef/+/+/run/#", "chef/myorg/web01/run/+")
	}
}
