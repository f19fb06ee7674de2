package router_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/config"
	"github.com/opsfirehose/firehose/internal/strictyaml"
	"github.com/opsfirehose/firehose/router"
	natssink "github.com/opsfirehose/firehose/sinks/nats"
)

// keyErrors maps each problem's key to its message.
func keyErrors(t *testing.T, err error) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var ke *strictyaml.KeyError
		if errors.As(err, &ke) {
			out[ke.Key] = ke.Err.Error()
			return
		}
		if u := errors.Unwrap(err); u != nil {
			walk(u)
			return
		}
		t.Errorf("a problem without a key: %v", err)
	}
	if err != nil {
		walk(err)
	}
	return out
}

func TestRouteConfigErrorsNameTheirKeys(t *testing.T) {
	const doc = `
sinks:
  core: {type: nats, urls: ["nats://127.0.0.1:4222"]}
routes:
  - {name: failures, filters: ["chef/#/failure"], sink: core}
  - {name: failures, filters: ["chef/+/+/run/failure"], sink: core}
  - {name: elsewhere, filters: ["ansible/#"], sink: nowhere}
`
	cfg := config.Default()
	err := config.Parse([]byte(doc), &cfg, config.Options{})
	if err == nil {
		t.Fatal("the config loaded")
	}
	got := keyErrors(t, err)
	for key, want := range map[string]string{
		"routes[0].filters[0]": "#",
		"routes[1].name":       `"failures" is already the name of routes[0]`,
		"routes[2].sink":       `"nowhere" is not defined under sinks`,
	} {
		if msg, ok := got[key]; !ok || !strings.Contains(msg, want) {
			t.Errorf("%s: got %q, want a problem mentioning %q (all: %v)", key, msg, want, got)
		}
	}
	if len(got) != 3 {
		t.Errorf("got %d problems, want 3: %v", len(got), got)
	}
}

func TestValidateSinksKeepsJetStreamRoutesInsideTheirStream(t *testing.T) {
	stream := func(subjects ...string) natssink.Config {
		c := *natssink.NewConfig(natssink.TypeNATS)
		c.Type, c.URLs = natssink.TypeJetStream, []string{"nats://127.0.0.1:4222"}
		c.Stream = &natssink.StreamConfig{Name: "FIREHOSE", Subjects: subjects}
		return c
	}
	rt := func(prefix string, rw *router.Rewrite, filters ...string) router.Config {
		r := route("r", "js", filters...)
		r.SubjectPrefix, r.Rewrite = prefix, rw
		return r
	}
	for _, tc := range []struct {
		name    string
		route   router.Config
		sink    natssink.Config
		outside string // the subject reported, "" when the route fits
	}{
		{"everything", rt("firehose", nil, "#"), stream("firehose.>"), ""},
		{"prefix outside", rt("fh.dc1", nil, "#"), stream("firehose.>"), "fh.dc1.>"},
		{"one filter outside", rt("firehose", nil, "chef/#", "ansible/#"), stream("firehose.chef.>"), "firehose.ansible.>"},
		{"a/# also matches a", rt("firehose", nil, "chef/#"), stream("firehose.chef.>"), "firehose.chef"},
		{"a/# with the parent", rt("firehose", nil, "chef/#"), stream("firehose.chef", "firehose.chef.>"), ""},
		{"wildcard inside literal", rt("firehose", nil, "chef/+/x"), stream("firehose.chef.acme.x"), "firehose.chef.*.x"},
		{"union of subjects", rt("firehose", nil, "#"), stream("firehose.*", "firehose.*.>"), ""},
		{"union falls short", rt("firehose", nil, "#"), stream("firehose.*", "firehose.*.*"), "firehose.>"},
		{"stream takes all", rt("fh", nil, "a/b"), stream(">"), ""},
		{"rewritten into the stream", rt("firehose", &router.Rewrite{From: "chef", To: "dc1/chef"}, "chef/#"), stream("firehose.dc1.>"), ""},
		{"rewrite applies to part", rt("firehose", &router.Rewrite{From: "chef", To: "dc1/chef"}, "#"), stream("firehose.dc1.>"), "firehose.>"},
		{"rewrite does not apply", rt("firehose", &router.Rewrite{From: "chef", To: "dc1/chef"}, "ansible/#"), stream("firehose.dc1.>"), "firehose.ansible.>"},
		{"no subjects configured", rt("fh", nil, "#"), stream(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := router.ValidateSinks([]router.Config{tc.route}, streamsOf(map[string]natssink.Config{"js": tc.sink}))
			if tc.outside == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			got := keyErrors(t, err)
			msg, ok := got["routes[0].filters[0]"]
			if len(tc.route.Filters) > 1 {
				msg, ok = got["routes[0].filters[1]"]
			}
			if !ok || !strings.Contains(msg, `sends "`+tc.outside+`"`) || !strings.Contains(msg, `route "r"`) {
				t.Fatalf("got %v, want a problem naming the route and %s", got, tc.outside)
			}
		})
	}
	// Other sink types are not checked.
	if err := router.ValidateSinks([]router.Config{rt("fh", nil, "#")}, streamsOf(map[string]natssink.Config{"js": sinkConfig(natssink.TypeNATS, "nats://x:4222")})); err != nil {
		t.Fatal(err)
	}
}

// streamsOf is what the config layer gives router.ValidateSinks: each NATS
// sink's stream and the subjects it captures, as the sink's config says.
func streamsOf(cfgs map[string]natssink.Config) func(string) (string, []string) {
	return func(name string) (string, []string) {
		c, ok := cfgs[name]
		if !ok {
			return "", nil
		}
		return c.StreamSubjects()
	}
}
