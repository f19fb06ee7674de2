package topics

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var subjectTests = []struct {
	topic, subject string
}{
	// nats-server's own mapping: no whitespace, '*', '>' or '%'.
	{"foo", "firehose.foo"},
	{"foo/bar", "firehose.foo.bar"},
	{"/foo", "firehose./.foo"},
	{"foo/", "firehose.foo./"},
	{"foo//bar", "firehose.foo./.bar"},
	{"a.b/c", "firehose.a//b.c"},
	{"/", "firehose././"},
	{"//", "firehose./././"},
	{"//a", "firehose././.a"},
	{"a//", "firehose.a././"},
	{"/a/", "firehose./.a./"},
	{".", "firehose.//"},
	{"a/./b", "firehose.a.//.b"},
	{"a./b", "firehose.a//.b"},
	{"a/.", "firehose.a.//"},
	{"/.", "firehose././/"},
	{"$SYS/broker", "firehose.$SYS.broker"},
	{"nœud/日本", "firehose.nœud.日本"},
	{"chef/myorg/web01.example.com/run/start", "firehose.chef.myorg.web01//example//com.run.start"},
	// The percent layer for what nats-server rejects or misreads.
	{"a b", "firehose.a%20b"},
	{"a\tb/c\nd", "firehose.a%09b.c%0Ad"},
	{"\x7f", "firehose.%7F"},
	{"\x01", "firehose.%01"},
	{"*", "firehose.%2A"},
	{">", "firehose.%3E"},
	{"a/*/>", "firehose.a.%2A.%3E"},
	{"a*/b>/**", "firehose.a*.b>.**"},
	// '%' is doubled only before a sequence the decoder would decode.
	{"a%20b", "firehose.a%2520b"},
	{"a%2Fb", "firehose.a%2Fb"},
	{"a%2fb", "firehose.a%2fb"},
	{"%2A", "firehose.%252A"},
	{"%2a", "firehose.%2a"},
	{"%3E", "firehose.%253E"},
	{"%25", "firehose.%2525"},
	{"%7F", "firehose.%257F"},
	{"%7f", "firehose.%7f"},
	{"%21", "firehose.%21"},
	{"%", "firehose.%"},
	{"100%", "firehose.100%"},
	{"%2", "firehose.%2"},
	{"%%20", "firehose.%%2520"},
	{"%2 ", "firehose.%2%20"},
	{"% ", "firehose.%%20"},
	{"%5F/x", "firehose.%5F.x"},
	// Escaped builder output travels unchanged and readable.
	{"ansible/playbook/u/stats/web%2F01%2Bx%23", "firehose.ansible.playbook.u.stats.web%2F01%2Bx%23"},
}

func TestToSubject(t *testing.T) {
	for _, tt := range subjectTests {
		got, err := ToSubject(DefaultSubjectPrefix, tt.topic)
		require.NoError(t, err, "%q", tt.topic)
		assert.Equal(t, tt.subject, got, "ToSubject(%q)", tt.topic)
		assert.Equal(t, tt.subject, SubjectOf(DefaultSubjectPrefix, tt.topic), "SubjectOf(%q)", tt.topic)

		back, err := FromSubject(DefaultSubjectPrefix, tt.subject)
		require.NoError(t, err, "%q", tt.subject)
		assert.Equal(t, tt.topic, back, "FromSubject(%q)", tt.subject)

		if natsServerMaps(tt.topic) {
			ref, err := refMQTTToNATSSubjectConversion([]byte(tt.topic), false)
			require.NoError(t, err)
			assert.Equal(t, tt.subject, "firehose."+string(ref), "nats-server maps %q differently", tt.topic)
			assert.Equal(t, tt.topic, string(refNATSSubjectToMQTTTopic(ref)), "nats-server reverses %q differently", ref)
		}
	}
}

func TestToSubjectPrefix(t *testing.T) {
	got, err := ToSubject("dc1.firehose", "chef/o/n/status")
	require.NoError(t, err)
	assert.Equal(t, "dc1.firehose.chef.o.n.status", got)
	back, err := FromSubject("dc1.firehose", got)
	require.NoError(t, err)
	assert.Equal(t, "chef/o/n/status", back)
}

func TestToSubjectErrors(t *testing.T) {
	tests := []struct {
		prefix, topic, msg string
		sentinel           error
	}{
		{"firehose", "", "invalid topic name: empty", ErrInvalidName},
		{"firehose", "a/+", "invalid topic name: wildcard '+' at byte 2", ErrInvalidName},
		{"firehose", "#", "invalid topic name: wildcard '#' at byte 0", ErrInvalidName},
		{"firehose", "a\x00", "invalid topic name: NUL at byte 1", ErrInvalidName},
		{"firehose", "\xff", "invalid topic name: not valid UTF-8", ErrInvalidName},
		{"", "a", "invalid nats subject: empty prefix", ErrInvalidSubject},
		{"fire hose", "a", "invalid nats subject: prefix has whitespace or control character ' ' at byte 4", ErrInvalidSubject},
	}
	for _, tt := range tests {
		got, err := ToSubject(tt.prefix, tt.topic)
		require.ErrorIs(t, err, tt.sentinel, "%q", tt.topic)
		assert.EqualError(t, err, tt.msg)
		assert.Empty(t, got)
	}
}

func TestFromSubjectErrors(t *testing.T) {
	tests := []struct{ subject, msg string }{
		{"firehose", `invalid nats subject: "firehose" is not under prefix "firehose"`},
		{"firehose.", `invalid nats subject: "firehose." is not under prefix "firehose"`},
		{"firehosex.a", `invalid nats subject: "firehosex.a" is not under prefix "firehose"`},
		{"other.a", `invalid nats subject: "other.a" is not under prefix "firehose"`},
		{"", `invalid nats subject: "" is not under prefix "firehose"`},
		{"firehose.a..b", `invalid nats subject: "firehose.a..b" is not the image of any topic name`},
		{"firehose..a", `invalid nats subject: "firehose..a" is not the image of any topic name`},
		{"firehose.a.", `invalid nats subject: "firehose.a." is not the image of any topic name`},
		{"firehose.*", `invalid nats subject: "firehose.*" is not the image of any topic name`},
		{"firehose.a.>", `invalid nats subject: "firehose.a.>" is not the image of any topic name`},
		{"firehose.a b", `invalid nats subject: "firehose.a b" is not the image of any topic name`},
		{"firehose.a%2Ab", `invalid nats subject: "firehose.a%2Ab" is not the image of any topic name`},
		{"firehose.a+b", `invalid nats subject: "firehose.a+b" is not the image of any topic name`},
		{"firehose.%00", `invalid nats subject: "firehose.%00" is not the image of any topic name`},
		{"firehose.a/", `invalid nats subject: "firehose.a/" is not the image of any topic name`},
		{"firehose.//.", `invalid nats subject: "firehose.//." is not the image of any topic name`},
	}
	for _, tt := range tests {
		got, err := FromSubject(DefaultSubjectPrefix, tt.subject)
		require.ErrorIs(t, err, ErrInvalidSubject, "%q", tt.subject)
		assert.EqualError(t, err, tt.msg)
		assert.Empty(t, got)
	}
	_, err := FromSubject("bad prefix", "bad prefix.a")
	require.ErrorIs(t, err, ErrInvalidSubject)
}

func TestFilterToSubject(t *testing.T) {
	tests := []struct{ filter, subject string }{
		{"+", "firehose.*"},
		{"#", "firehose.>"},
		{"a/+/c", "firehose.a.*.c"},
		{"a/#", "firehose.a.>"},
		{"/+", "firehose./.*"},
		{"+/+", "firehose.*.*"},
		{"a//+", "firehose.a./.*"},
		{"+//", "firehose.*././"},
		{"chef/+/web01.example.com/run/#", "firehose.chef.*.web01//example//com.run.>"},
		{"a/b c/#", "firehose.a.b%20c.>"},
		{"*/>", "firehose.%2A.%3E"},
		{"a%20b/+", "firehose.a%2520b.*"},
		{"foo/bar", "firehose.foo.bar"},
		{"$SYS/#", "firehose.$SYS.>"},
	}
	for _, tt := range tests {
		got, err := FilterToSubject(DefaultSubjectPrefix, tt.filter)
		require.NoError(t, err, "%q", tt.filter)
		assert.Equal(t, tt.subject, got, "FilterToSubject(%q)", tt.filter)
		if natsServerMaps(tt.filter) {
			ref, err := refMQTTToNATSSubjectConversion([]byte(tt.filter), true)
			require.NoError(t, err)
			assert.Equal(t, tt.subject, "firehose."+string(ref), "nats-server maps %q differently", tt.filter)
		}
	}

	bad := []struct {
		filter, msg string
		sentinel    error
	}{
		{"$share/g/a/#", "invalid topic filter: shared subscription has no nats subject; use a queue group", ErrInvalidFilter},
		{"a/#/b", "invalid topic filter: '#' must be the last level", ErrInvalidFilter},
		{"a+", "invalid topic filter: '+' at byte 1 must be a whole level", ErrInvalidFilter},
		{"", "invalid topic filter: empty", ErrInvalidFilter},
	}
	for _, tt := range bad {
		got, err := FilterToSubject(DefaultSubjectPrefix, tt.filter)
		require.ErrorIs(t, err, tt.sentinel, "%q", tt.filter)
		assert.EqualError(t, err, tt.msg)
		assert.Empty(t, got)
	}
}

// A route's subject filter must select exactly the subjects of the topics its
// MQTT filter matches, apart from the two documented gaps ('#' matching the
// parent level, and the '$' rule).
func TestFilterToSubjectAgreesWithMatch(t *testing.T) {
	filters := []string{"+", "a/+", "+/+", "/+", "a//+", "+/b", "a/#", "+/#", "a/+/c", "*/+", "a b/+"}
	topics := []string{"a", "b", "/", "a/b", "a/", "/b", "a//b", "a/b/c", "a//", "*/x", "a b/c", "a.b/c", "a/b.c"}
	for _, f := range filters {
		fs, err := FilterToSubject(DefaultSubjectPrefix, f)
		require.NoError(t, err)
		for _, tp := range topics {
			s, err := ToSubject(DefaultSubjectPrefix, tp)
			require.NoError(t, err)
			want := Match(f, tp)
			if parent, ok := strings.CutSuffix(f, "/#"); ok && Match(parent, tp) {
				want = false
			}
			assert.Equal(t, want, subjectMatch(fs, s), "filter %q (%q), topic %q (%q)", f, fs, tp, s)
		}
	}
}

// subjectMatch is NATS subject matching: '*' is one token, '>' one or more.
func subjectMatch(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, ft := range f {
		if ft == ">" {
			return len(s) > i
		}
		if i >= len(s) || (ft != "*" && ft != s[i]) {
			return false
		}
	}
	return len(f) == len(s)
}

func TestValidSubjectPrefix(t *testing.T) {
	for _, s := range []string{"firehose", "dc1.firehose", "a.b.c", "$JS", "fire-hose_1"} {
		assert.NoError(t, ValidSubjectPrefix(s), s)
	}
	bad := []struct{ in, msg string }{
		{"", "invalid nats subject: empty prefix"},
		{".a", "invalid nats subject: prefix has an empty token at byte 0"},
		{"a.", "invalid nats subject: prefix has an empty token at byte 1"},
		{"a..b", "invalid nats subject: prefix has an empty token at byte 1"},
		{"a.*", "invalid nats subject: prefix has wildcard '*' at byte 2"},
		{"a>", "invalid nats subject: prefix has wildcard '>' at byte 1"},
		{"a b", "invalid nats subject: prefix has whitespace or control character ' ' at byte 1"},
		{"a\tb", "invalid nats subject: prefix has whitespace or control character '\\t' at byte 1"},
		{"a\x7f", "invalid nats subject: prefix has whitespace or control character '\\x7f' at byte 1"},
	}
	for _, tt := range bad {
		err := ValidSubjectPrefix(tt.in)
		require.ErrorIs(t, err, ErrInvalidSubject, "%q", tt.in)
		assert.EqualError(t, err, tt.msg)
	}
}

func FuzzNATSRoundTrip(f *testing.F) {
	for _, tt := range subjectTests {
		f.Add(tt.topic)
		f.Add(tt.subject)
	}
	for _, s := range []string{"firehose.a..b", "firehose.*", "firehose.//.", "firehose./", "firehose.%2A%", "firehose.a/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// s as a topic name.
		if ValidName(s) == nil {
			subj, err := ToSubject(DefaultSubjectPrefix, s)
			if err != nil {
				t.Fatalf("ToSubject(%q): %v", s, err)
			}
			for _, tok := range strings.Split(subj, ".") {
				if tok == "" || tok == "*" || tok == ">" {
					t.Fatalf("ToSubject(%q) = %q has token %q", s, subj, tok)
				}
			}
			if i := strings.IndexFunc(subj, func(r rune) bool { return r <= ' ' || r == 0x7f }); i >= 0 {
				t.Fatalf("ToSubject(%q) = %q has whitespace or control at %d", s, subj, i)
			}
			back, err := FromSubject(DefaultSubjectPrefix, subj)
			if err != nil {
				t.Fatalf("FromSubject(ToSubject(%q) = %q): %v", s, subj, err)
			}
			if back != s {
				t.Fatalf("FromSubject(ToSubject(%q) = %q) = %q", s, subj, back)
			}
			if natsServerMaps(s) {
				ref, err := refMQTTToNATSSubjectConversion([]byte(s), false)
				if err != nil || "firehose."+string(ref) != subj {
					t.Fatalf("ToSubject(%q) = %q, nats-server gives %q (%v)", s, subj, ref, err)
				}
			}
		}
		// s as a filter.
		if ValidFilter(s) == nil && !strings.HasPrefix(s, sharePrefix) {
			subj, err := FilterToSubject(DefaultSubjectPrefix, s)
			if err != nil {
				t.Fatalf("FilterToSubject(%q): %v", s, err)
			}
			if natsServerMaps(s) {
				ref, err := refMQTTToNATSSubjectConversion([]byte(s), true)
				if err != nil || "firehose."+string(ref) != subj {
					t.Fatalf("FilterToSubject(%q) = %q, nats-server gives %q (%v)", s, subj, ref, err)
				}
			}
		}
		// s as a subject, with and without our prefix.
		for _, subj := range []string{s, DefaultSubjectPrefix + "." + s} {
			topic, err := FromSubject(DefaultSubjectPrefix, subj)
			if err != nil {
				continue
			}
			again, err := ToSubject(DefaultSubjectPrefix, topic)
			if err != nil {
				t.Fatalf("FromSubject(%q) = %q, which ToSubject rejects: %v", subj, topic, err)
			}
			if again != subj {
				t.Fatalf("ToSubject(FromSubject(%q) = %q) = %q", subj, topic, again)
			}
		}
	})
}

func BenchmarkToSubject(b *testing.B) {
	for b.Loop() {
		_, _ = ToSubject(DefaultSubjectPrefix, "chef/myorg/web01.example.com/resource/apache2/updated")
	}
}

func BenchmarkFromSubject(b *testing.B) {
	for b.Loop() {
		_, _ = FromSubject(DefaultSubjectPrefix, "firehose.chef.myorg.web01//example//com.resource.apache2.updated")
	}
}

func BenchmarkFilterToSubject(b *testing.B) {
	for b.Loop() {
		_, _ = FilterToSubject(DefaultSubjectPrefix, "chef/+/+/resource/#")
	}
}
