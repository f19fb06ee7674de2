package chef

import (
	"strings"
	"testing"
)

func TestBlame(t *testing.T) {
	p := parsers(t)[ValidationOff]
	converge := func(status, resources, errorJSON, cookbooks string) []byte {
		return []byte(`{"message_type":"run_converge","node_name":"n","organization_name":"o","run_id":"r","status":"` + status +
			`","resources":[` + resources + `],"error":` + errorJSON + `,"cookbooks":` + cookbooks + `}`)
	}
	const cookbooks = `{"mysql":{"version":"8.0.2"},"ntp":{"version":"3.6.2"},"base":{"version":"0.1.0"}}`
	frames := func(fs ...string) string {
		return `{"class":"E","message":"m","backtrace":["` + strings.Join(fs, `","`) + `"]}`
	}
	tests := []struct {
		name string
		body []byte
		want string // name version blamed_by resource, or "" for none
	}{
		{"the real fixture: a compile-time failure, from the backtrace", fixture(t, "03_run_converge_failure_chef15_policyfile_macos"),
			"chef-client 11.5.0 backtrace "},
		{"the real fixture: the failed resource, not the one whose failure was ignored",
			fixture(t, "27_run_converge_failed_resource_chef_delivery"), "insights-real 0.1.1 resource file[/real_failed/file/resource]"},
		{"a success blames nobody", converge("success", `{"status":"failed","cookbook_name":"mysql"}`, `null`, cookbooks), ""},
		{"the resource's own version", converge("failure",
			`{"status":"updated","cookbook_name":"ntp"},{"type":"mysql_service","name":"default","status":"failed","cookbook_name":"mysql","cookbook_version":"8.0.1","recipe_name":"server"}`,
			frames("/var/chef/cache/cookbooks/ntp/recipes/default.rb:3"), cookbooks), "mysql 8.0.1 resource mysql_service[default]"},
		{"no resource version: the node's", converge("failure", `{"status":"failed","cookbook_name":"mysql","cookbook_version":null}`, `null`, cookbooks),
			"mysql 8.0.2 resource "},
		{"ignore_failure quiet is ignored", converge("failure", `{"status":"failed","cookbook_name":"mysql","ignore_failure":"quiet"}`,
			frames("/opt/chef/lib/chef/x.rb:1", "/var/chef/cache/cookbooks/ntp/recipes/default.rb:3", "/var/chef/cache/cookbooks/base/recipes/default.rb:1"), cookbooks),
			"ntp 3.6.2 backtrace "},
		{"a failed resource outside a cookbook: the backtrace", converge("failure", `{"status":"failed","cookbook_name":null}`,
			frames(`C:\\chef\\cache\\cookbooks\\base\\recipes\\default.rb:9`), cookbooks), "base 0.1.0 backtrace "},
		{"a cookbook the node does not list has no version", converge("failure", ``,
			frames("/tmp/kitchen/cookbooks/unlisted/libraries/x.rb:2"), cookbooks), "unlisted <nil> backtrace "},
		{"no frame under cookbooks/: unknown", converge("failure", ``, frames("/opt/chef/lib/chef/client.rb:1", "cookbooks.rb:2"), cookbooks), ""},
		{"no error at all: unknown", converge("failure", ``, `null`, `null`), ""},
	}
	for _, tt := range tests {
		m, err := p.Parse(tt.body)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		got := ""
		if f := m.(*RunConverge).Blame(); f != nil {
			v := "<nil>"
			if f.Version != nil {
				v = *f.Version
			}
			got = f.Name + " " + v + " " + f.BlamedBy + " " + f.Resource
		}
		if got != tt.want {
			t.Errorf("%s: blamed %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestCookbooks(t *testing.T) {
	p := parsers(t)[ValidationOff]
	head := `{"message_type":"run_converge","node_name":"n","organization_name":"o","run_id":"r","status":"success"`
	tests := []struct{ members, want string }{
		{`,"node":{"automatic":{"cookbooks":{"b":{"version":"2"},"a":{"version":"1"}}}},"cookbooks":{"c":{"version":"3"}}}`, "a=1 b=2"},
		{`,"node":{"automatic":{}},"cookbooks":{"c":{"version":"3"},"x":{},"y":{"version":4}}}`, "c=3"},
		{`,"cookbooks":{"c":{"version":"3"},"c":{"version":"4"}}}`, "c=4"},
		{`,"node":{"automatic":{"cookbooks":{"a":{"version":"1"}}},"automatic":{"chef_packages":{}}}}`, ""},
		{`,"node":{"automatic":{"cookbooks":[]}}}`, ""},
		{`}`, ""},
	}
	for _, tt := range tests {
		m, err := p.Parse([]byte(head + tt.members))
		if err != nil {
			t.Fatalf("%s: %v", tt.members, err)
		}
		var got []string
		for _, c := range m.(*RunConverge).Cookbooks() {
			got = append(got, c.Name+"="+c.Version)
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("%s: %v, want %s", tt.members, got, tt.want)
		}
	}
	m, _ := p.Parse(fixture(t, "02_run_converge_success_chef12_ubuntu"))
	if cbs := m.(*RunConverge).Cookbooks(); len(cbs) != 34 || cbs[0].Name != "apt" || cbs[0].Version != "6.1.4" {
		t.Errorf("fixture 02: %d cookbooks, first %+v", len(cbs), cbs[0])
	}
}
