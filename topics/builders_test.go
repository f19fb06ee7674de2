package topics

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuilders(t *testing.T) {
	const nasty = "a\x00b\x7f\xff"
	tests := []struct {
		name string
		got  func() (string, error)
		want string
	}{
		{"chef run start", func() (string, error) { return Chef{}.RunStart("myorg", "web01") }, "chef/myorg/web01/run/start"},
		{"chef run start empty node", func() (string, error) { return Chef{}.RunStart("myorg", "") }, "chef/myorg/_/run/start"},
		{"chef run start node _", func() (string, error) { return Chef{}.RunStart("myorg", "_") }, "chef/myorg/%5F/run/start"},
		{"chef run start node with separator", func() (string, error) { return Chef{}.RunStart("myorg", "web/01+x#") }, "chef/myorg/web%2F01%2Bx%23/run/start"},
		{"chef run end success", func() (string, error) { return Chef{}.RunEnd("myorg", "web01", "success") }, "chef/myorg/web01/run/success"},
		{"chef run end failure", func() (string, error) { return Chef{}.RunEnd("myorg", "web01", "failure") }, "chef/myorg/web01/run/failure"},
		{"chef run end empty status", func() (string, error) { return Chef{}.RunEnd("", "web01", "") }, "chef/_/web01/run/_"},
		{"chef status", func() (string, error) { return Chef{}.Status("myorg", "web01.example.com") }, "chef/myorg/web01.example.com/status"},
		{"chef resource", func() (string, error) { return Chef{}.Resource("myorg", "web01", "apache2", "updated") }, "chef/myorg/web01/resource/apache2/updated"},
		{"chef resource nasty node", func() (string, error) { return Chef{}.Resource("myorg", nasty, "cb", "up to date") }, "chef/myorg/a%00b%7F%FF/resource/cb/up to date"},
		{"chef action", func() (string, error) { return Chef{}.Action("myorg", "node", "update", "web01") }, "chef/myorg/action/node/update/web01"},
		{"chef action data bag item", func() (string, error) { return Chef{}.Action("myorg", "item", "create", "users/alice") }, "chef/myorg/action/item/create/users%2Falice"},
		{"chef liveness", func() (string, error) { return Chef{}.Liveness("myorg", "web01") }, "chef/myorg/web01/liveness"},
		{"chef compliance", func() (string, error) { return Chef{}.Compliance("myorg", "web01", "passed") }, "chef/myorg/web01/compliance/passed"},
		{"chef compliance waived", func() (string, error) { return Chef{}.Compliance("myorg", "web01", "waived") }, "chef/myorg/web01/compliance/waived"},
		{"chef team failure", func() (string, error) { return Chef{}.TeamFailure("myorg", "dba", "db01") }, "chef/myorg/team/dba/failure/db01"},
		{"chef team failure escaped", func() (string, error) { return Chef{}.TeamFailure("", "db a/#", "My Node") }, "chef/_/team/db a%2F%23/failure/My Node"},
		{"chef cookbook rollout", func() (string, error) { return Chef{}.CookbookRollout("myorg", "mysql", "8.0.2", "success") }, "chef/myorg/cookbook/mysql/8.0.2/success"},
		{"chef cookbook rollout escaped", func() (string, error) { return Chef{}.CookbookRollout("o", "my+sql", "1.0/rc", "failure") }, "chef/o/cookbook/my%2Bsql/1.0%2Frc/failure"},
		{"chef cookbook versions", func() (string, error) { return Chef{}.CookbookVersions("myorg", "mysql") }, "chef/myorg/cookbook/mysql/versions"},
		{"chef custom prefix", func() (string, error) { return Chef{Prefix: "ops/chef"}.Status("o", "n") }, "ops/chef/o/n/status"},
		{"ansible play start", func() (string, error) {
			return Ansible{}.PlayStart("5a95e9da-8d33-4dbb-a8b3-a77affc065d0")
		}, "ansible/playbook/5a95e9da-8d33-4dbb-a8b3-a77affc065d0/action/start"},
		{"ansible finish", func() (string, error) { return Ansible{}.Finish("b259ac6d", "FAILED") }, "ansible/playbook/b259ac6d/action/finish/FAILED"},
		{"ansible stats", func() (string, error) {
			return Ansible{}.Stats("b259ac6d", "controller00.vanilla.ic.openstack.org")
		}, "ansible/playbook/b259ac6d/stats/controller00.vanilla.ic.openstack.org"},
		{"ansible stats hostname with separator", func() (string, error) { return Ansible{}.Stats("u", "web/01+x#") }, "ansible/playbook/u/stats/web%2F01%2Bx%23"},
		{"ansible task", func() (string, error) { return Ansible{}.Task("u", "compute014", "UNREACHABLE") }, "ansible/playbook/u/task/compute014/UNREACHABLE"},
		{"ansible task empty host", func() (string, error) { return Ansible{}.Task("u", "", "OK") }, "ansible/playbook/u/task/_/OK"},
		{"ansible custom prefix", func() (string, error) { return Ansible{Prefix: "ci"}.Finish("u", "OK") }, "ci/playbook/u/action/finish/OK"},
		{"configdb values", func() (string, error) { return ConfigDB{}.Values("prod", "nginx", KindValues, nil) }, "configdb/prod/nginx/values"},
		{"configdb resource with separator is one level", func() (string, error) {
			return ConfigDB{}.Values("prod", "override/plugins", KindValues, nil)
		}, "configdb/prod/override%2Fplugins/values"},
		{"configdb overrides with levels", func() (string, error) {
			return ConfigDB{}.Values("1", "nginx", KindOverrides, []LevelValue{{"nodes", "node-1"}, {"roles", ""}})
		}, "configdb/1/nginx/overrides/nodes/node-1/roles/_"},
		{"configdb deep levels", func() (string, error) {
			lv := make([]LevelValue, 8)
			for i := range lv {
				lv[i] = LevelValue{"l", "v"}
			}
			return ConfigDB{}.Values("e", "r", KindValues, lv)
		}, "configdb/e/r/values" + strings.Repeat("/l/v", 8)},
		{"configdb environment", func() (string, error) { return ConfigDB{}.Environment("prod", "created") }, "configdb/prod/environment/created"},
		{"configdb component", func() (string, error) { return ConfigDB{}.Component("42", "deleted") }, "configdb/components/42/deleted"},
		{"gerrit", func() (string, error) { return Gerrit{}.Event("openstack/nova", "comment-added") }, "gerrit/openstack/nova/comment-added"},
		{"gerrit single segment", func() (string, error) { return Gerrit{}.Event("nova", "ref-updated") }, "gerrit/nova/ref-updated"},
		{"gerrit empty segments", func() (string, error) { return Gerrit{}.Event("/a//b/", "x") }, "gerrit/_/a/_/b/_/x"},
		{"gerrit empty project", func() (string, error) { return Gerrit{}.Event("", "") }, "gerrit/_/_"},
		{"gerrit segment escaping", func() (string, error) { return Gerrit{}.Event("open+stack/no#va", "a/b") }, "gerrit/open%2Bstack/no%23va/a%2Fb"},
		{"launchpad full", func() (string, error) { return Launchpad{}.Event("octavia", "bug", "1680938") }, "launchpad/octavia/bug/1680938"},
		{"launchpad no bug number", func() (string, error) { return Launchpad{}.Event("octavia", "bug", "") }, "launchpad/octavia/bug"},
		{"launchpad stops at first missing", func() (string, error) { return Launchpad{}.Event("octavia", "", "1680938") }, "launchpad/octavia"},
		{"launchpad no project", func() (string, error) { return Launchpad{}.Event("", "bug", "1") }, "launchpad"},
		{"launchpad escaping", func() (string, error) { return Launchpad{}.Event("a/b", "_", "1") }, "launchpad/a%2Fb/%5F/1"},
		{"subunit", func() (string, error) {
			return Subunit{}.Result("subunit-worker01", "openstack", "nova", "123456")
		}, "gearman-subunit/subunit-worker01/openstack/nova/123456"},
		{"subunit custom prefix", func() (string, error) { return Subunit{Prefix: "subunit"}.Result("w", "", "r", "1") }, "subunit/w/_/r/1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.got()
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.NoError(t, ValidName(got))
		})
	}
}

func TestBuilderErrors(t *testing.T) {
	long := strings.Repeat("a", 3000)
	tests := []struct {
		name     string
		got      func() (string, error)
		level    string
		msg      string
		sentinel error
	}{
		{"long node", func() (string, error) { return Chef{}.RunStart("o", long) },
			"node", "node: level is 3000 bytes escaped, limit 1024: topic too long", ErrTooLong},
		{"level over the limit only once escaped", func() (string, error) { return Ansible{}.Stats("u", strings.Repeat("/", 342)) },
			"host", "host: level is 1026 bytes escaped, limit 1024: topic too long", ErrTooLong},
		{"first bad field is named", func() (string, error) { return Chef{}.Resource("o", "n", long, long) },
			"cookbook", "cookbook: level is 3000 bytes escaped, limit 1024: topic too long", ErrTooLong},
		{"entity name", func() (string, error) { return Chef{}.Action("o", "t", "k", long) },
			"entity_name", "entity_name: level is 3000 bytes escaped, limit 1024: topic too long", ErrTooLong},
		{"gerrit segment", func() (string, error) { return Gerrit{}.Event("openstack/"+long, "x") },
			"project", "project: level is 3000 bytes escaped, limit 1024: topic too long", ErrTooLong},
		{"launchpad bug number", func() (string, error) { return Launchpad{}.Event("p", "bug", long) },
			"bug_number", "bug_number: level is 3000 bytes escaped, limit 1024: topic too long", ErrTooLong},
		{"configdb level value", func() (string, error) {
			return ConfigDB{}.Values("e", "r", KindValues, []LevelValue{{"a", "b"}, {"nodes", long}})
		}, "levels[1].value", "levels[1].value: level is 3000 bytes escaped, limit 1024: topic too long", ErrTooLong},
		{"configdb whole topic", func() (string, error) {
			lv := make([]LevelValue, 40)
			for i := range lv {
				lv[i] = LevelValue{strings.Repeat("n", 1000), strings.Repeat("v", 1000)}
			}
			return ConfigDB{}.Values("e", "r", KindValues, lv)
		}, "levels[32].value", "levels[32].value: topic would be more than 65535 bytes: topic too long", ErrTooLong},
		{"gerrit whole topic", func() (string, error) {
			return Gerrit{}.Event(strings.Repeat("/"+strings.Repeat("p", 1000), 70), "x")
		}, "project", "project: topic would be more than 65535 bytes: topic too long", ErrTooLong},
		{"a fixed word that does not fit blames the data before it", func() (string, error) {
			return Chef{Prefix: strings.Repeat("p", 65000)}.RunStart("o", strings.Repeat("n", 530))
		}, "node", "node: topic would be more than 65535 bytes: topic too long", ErrTooLong},
		{"a long prefix alone is blamed", func() (string, error) {
			return Ansible{Prefix: strings.Repeat("p", 65530)}.PlayStart("u")
		}, "prefix", "prefix: topic would be more than 65535 bytes: topic too long", ErrTooLong},
		{"dollar prefix", func() (string, error) { return Chef{Prefix: "$SYS"}.Status("o", "n") },
			"prefix", "prefix: invalid topic prefix: must not start with '$', which is reserved for the broker", ErrInvalidPrefix},
		{"wildcard prefix", func() (string, error) { return Subunit{Prefix: "a/#"}.Result("w", "n", "r", "1") },
			"prefix", "prefix: invalid topic prefix: wildcard '#' at byte 2", ErrInvalidPrefix},
		{"empty level in prefix", func() (string, error) { return Launchpad{Prefix: "a//b"}.Event("", "", "") },
			"prefix", "prefix: invalid topic prefix: empty level at byte 1", ErrInvalidPrefix},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.got()
			assert.Empty(t, got)
			require.ErrorIs(t, err, tt.sentinel)
			var le *LevelError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, tt.level, le.Level)
			assert.EqualError(t, err, tt.msg)
		})
	}
}

func TestBuilderLimitsAreInclusive(t *testing.T) {
	got, err := Chef{}.RunStart("o", strings.Repeat("a", MaxLevelBytes))
	require.NoError(t, err)
	assert.Len(t, got, len("chef/o//run/start")+MaxLevelBytes)

	_, err = Chef{}.RunStart("o", strings.Repeat("a", MaxLevelBytes+1))
	assert.ErrorIs(t, err, ErrTooLong)

	// "gerrit/" + project + "/x" is exactly MaxTopicBytes long when the
	// project is 65526 bytes: 65 segments of 1000 bytes, 64 separators, and
	// a last segment of 461 bytes after its separator.
	project := strings.Repeat(strings.Repeat("p", 1000)+"/", 65) + strings.Repeat("q", 461)
	require.Len(t, project, MaxTopicBytes-len("gerrit/")-len("/x"))
	got, err = Gerrit{}.Event(project, "x")
	require.NoError(t, err)
	assert.Len(t, got, MaxTopicBytes)

	_, err = Gerrit{}.Event(project+"q", "x")
	var le *LevelError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "event_type", le.Level, "the event type is the level that does not fit")
	assert.ErrorIs(t, err, ErrTooLong)
}

func TestBuildersAllocateOnce(t *testing.T) {
	levels := []LevelValue{{"nodes", "node-1"}, {"roles", "web"}}
	cases := map[string]func(){
		"chef resource":  func() { _, _ = Chef{}.Resource("myorg", "web01", "apache2", "updated") },
		"chef escaped":   func() { _, _ = Chef{}.RunStart("myorg", "web/01") },
		"chef prefix":    func() { _, _ = Chef{Prefix: "ops/chef"}.Status("myorg", "web01") },
		"ansible task":   func() { _, _ = Ansible{}.Task("5a95e9da", "compute014", "OK") },
		"configdb":       func() { _, _ = ConfigDB{}.Values("prod", "override/plugins", KindValues, levels) },
		"gerrit":         func() { _, _ = Gerrit{}.Event("openstack/nova", "comment-added") },
		"launchpad":      func() { _, _ = Launchpad{}.Event("octavia", "bug", "1680938") },
		"subunit result": func() { _, _ = Subunit{}.Result("subunit-worker01", "openstack", "nova", "123456") },
	}
	for name, fn := range cases {
		assert.Equal(t, 1.0, testing.AllocsPerRun(100, fn), name)
	}
}

func TestLevelError(t *testing.T) {
	err := error(&LevelError{Level: "node", Err: levelTooLong(3000)})
	assert.EqualError(t, err, "node: level is 3000 bytes escaped, limit 1024: topic too long")
	assert.ErrorIs(t, err, ErrTooLong)
	assert.False(t, errors.Is(err, ErrInvalidPrefix))
}

// checkBuilt checks a builder's result: either a *LevelError for a reason the
// inputs justify, or a valid topic whose levels, unescaped, are exactly the
// expected ones.
func checkBuilt(t *testing.T, prefix, def string, got string, err error, want []string) {
	t.Helper()
	if prefix == "" {
		prefix = def
	}
	if err != nil {
		var le *LevelError
		if !errors.As(err, &le) {
			t.Fatalf("error %v is not a *LevelError", err)
		}
		switch {
		case errors.Is(err, ErrInvalidPrefix):
			if ValidPrefix(prefix) == nil {
				t.Fatalf("prefix %q is valid, but: %v", prefix, err)
			}
		case errors.Is(err, ErrTooLong):
			total := len(prefix)
			tooLong := false
			for _, w := range want {
				l := escapedLen(w)
				total += 1 + l
				tooLong = tooLong || l > MaxLevelBytes
			}
			if !tooLong && total <= MaxTopicBytes {
				t.Fatalf("levels %q are short enough, but: %v", want, err)
			}
		default:
			t.Fatalf("unexpected error %v", err)
		}
		return
	}
	if err := ValidPrefix(prefix); err != nil {
		t.Fatalf("built %q with invalid prefix %q", got, prefix)
	}
	if err := ValidName(got); err != nil {
		t.Fatalf("built %q: %v", got, err)
	}
	if got[0] == '$' {
		t.Fatalf("built %q starts with '$'", got)
	}
	rest, ok := strings.CutPrefix(got, prefix)
	if !ok {
		t.Fatalf("built %q does not start with %q", got, prefix)
	}
	var levels []string
	if rest != "" {
		levels = strings.Split(rest[1:], "/")
	}
	if len(levels) != len(want) {
		t.Fatalf("built %q: %d levels after the prefix, want %d (%q)", got, len(levels), len(want), want)
	}
	for i, l := range levels {
		if len(l) > MaxLevelBytes {
			t.Fatalf("built %q: level %d is %d bytes", got, i, len(l))
		}
		u, err := Unescape(l)
		if err != nil || u != want[i] {
			t.Fatalf("built %q: level %d is %q, unescapes to %q (%v), want %q", got, i, l, u, err, want[i])
		}
	}
}

func FuzzBuilders(f *testing.F) {
	f.Add("", "myorg", "web01", "apache2", "updated")
	f.Add("", "openstack/nova", "comment-added", "", "_")
	f.Add("ops/chef", "", "_", "web/01+x#", "a\x00b\x7f\xff")
	f.Add("$SYS", "a", "b", "c", "d")
	f.Add("a//b", "a", "b", "c", "d")
	f.Add("x/#", "/", "//", "%", "%zz")
	f.Add("chef", "override/plugins", "values", "\u0085", "\xc3")
	f.Add("", strings.Repeat("/", 400), "x", "y", "z")
	f.Fuzz(func(t *testing.T, prefix, a, b, c, d string) {
		var got string
		var err error

		got, err = Chef{prefix}.RunStart(a, b)
		checkBuilt(t, prefix, "chef", got, err, []string{a, b, "run", "start"})
		got, err = Chef{prefix}.RunEnd(a, b, c)
		checkBuilt(t, prefix, "chef", got, err, []string{a, b, "run", c})
		got, err = Chef{prefix}.Status(a, b)
		checkBuilt(t, prefix, "chef", got, err, []string{a, b, "status"})
		got, err = Chef{prefix}.Resource(a, b, c, d)
		checkBuilt(t, prefix, "chef", got, err, []string{a, b, "resource", c, d})
		got, err = Chef{prefix}.Action(a, b, c, d)
		checkBuilt(t, prefix, "chef", got, err, []string{a, "action", b, c, d})
		got, err = Chef{prefix}.Liveness(a, b)
		checkBuilt(t, prefix, "chef", got, err, []string{a, b, "liveness"})
		got, err = Chef{prefix}.Compliance(a, b, c)
		checkBuilt(t, prefix, "chef", got, err, []string{a, b, "compliance", c})
		got, err = Chef{prefix}.TeamFailure(a, b, c)
		checkBuilt(t, prefix, "chef", got, err, []string{a, "team", b, "failure", c})
		got, err = Chef{prefix}.CookbookRollout(a, b, c, d)
		checkBuilt(t, prefix, "chef", got, err, []string{a, "cookbook", b, c, d})
		got, err = Chef{prefix}.CookbookVersions(a, b)
		checkBuilt(t, prefix, "chef", got, err, []string{a, "cookbook", b, "versions"})

		got, err = Ansible{prefix}.PlayStart(a)
		checkBuilt(t, prefix, "ansible", got, err, []string{"playbook", a, "action", "start"})
		got, err = Ansible{prefix}.Finish(a, b)
		checkBuilt(t, prefix, "ansible", got, err, []string{"playbook", a, "action", "finish", b})
		got, err = Ansible{prefix}.Stats(a, b)
		checkBuilt(t, prefix, "ansible", got, err, []string{"playbook", a, "stats", b})
		got, err = Ansible{prefix}.Task(a, b, c)
		checkBuilt(t, prefix, "ansible", got, err, []string{"playbook", a, "task", b, c})

		got, err = ConfigDB{prefix}.Values(a, b, c, nil)
		checkBuilt(t, prefix, "configdb", got, err, []string{a, b, c})
		got, err = ConfigDB{prefix}.Values(a, b, c, []LevelValue{{d, a}, {c, b}})
		checkBuilt(t, prefix, "configdb", got, err, []string{a, b, c, d, a, c, b})
		got, err = ConfigDB{prefix}.Environment(a, b)
		checkBuilt(t, prefix, "configdb", got, err, []string{a, "environment", b})
		got, err = ConfigDB{prefix}.Component(a, b)
		checkBuilt(t, prefix, "configdb", got, err, []string{"components", a, b})

		got, err = Gerrit{prefix}.Event(a, b)
		checkBuilt(t, prefix, "gerrit", got, err, append(strings.Split(a, "/"), b))

		got, err = Launchpad{prefix}.Event(a, b, c)
		var lp []string
		for _, v := range []string{a, b, c} {
			if v == "" {
				break
			}
			lp = append(lp, v)
		}
		checkBuilt(t, prefix, "launchpad", got, err, lp)

		got, err = Subunit{prefix}.Result(a, b, c, d)
		checkBuilt(t, prefix, "gearman-subunit", got, err, []string{a, b, c, d})
	})
}

func BenchmarkChefRunStart(b *testing.B) {
	for b.Loop() {
		_, _ = Chef{}.RunStart("myorg", "web01.example.com")
	}
}

func BenchmarkChefResource(b *testing.B) {
	for b.Loop() {
		_, _ = Chef{}.Resource("myorg", "web01.example.com", "apache2", "updated")
	}
}

func BenchmarkChefResourceEscaped(b *testing.B) {
	for b.Loop() {
		_, _ = Chef{}.Resource("myorg", "web/01+x#", "apache2", "up to date")
	}
}

func BenchmarkChefResourcePrefix(b *testing.B) {
	for b.Loop() {
		_, _ = Chef{Prefix: "dc1/chef"}.Resource("myorg", "web01.example.com", "apache2", "updated")
	}
}

func BenchmarkAnsibleTask(b *testing.B) {
	for b.Loop() {
		_, _ = Ansible{}.Task("b259ac6d-6cb5-4403-bb8d-0ff2131c3d7a", "compute014.chocolate.ic.openstack.org", "OK")
	}
}

func BenchmarkConfigDBValues(b *testing.B) {
	levels := []LevelValue{{"nodes", "node-1"}, {"roles", "web"}}
	for b.Loop() {
		_, _ = ConfigDB{}.Values("prod", "override/plugins", KindValues, levels)
	}
}

func BenchmarkGerritEvent(b *testing.B) {
	for b.Loop() {
		_, _ = Gerrit{}.Event("openstack/nova", "comment-added")
	}
}

func BenchmarkLaunchpadEvent(b *testing.B) {
	for b.Loop() {
		_, _ = Launchpad{}.Event("octavia", "bug", "1680938")
	}
}

func BenchmarkSubunitResult(b *testing.B) {
	for b.Loop() {
		_, _ = Subunit{}.Result("subunit-worker01", "openstack", "nova", "123456")
	}
}
