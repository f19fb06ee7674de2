package dashboard

import (
	"os"
	"strings"
	"testing"
)

func TestSummarise(t *testing.T) {
	gerrit, err := os.ReadFile("../adapters/gerrit/testdata/patchset_created/input.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		source, topic, payload string
		title, detail, state   string
		url                    string
	}{
		{"gerrit", "gerrit/openstack/nova/patchset-created", string(gerrit),
			"openstack/nova patchset-created: Fix race in the scheduler's host cache", "change 12345 by Jane Developer", "", "https://review.example.org/c/openstack/nova/+/12345"},
		{"gerrit", "gerrit/openstack/nova/change-merged", `{"submitter":{"name":"Zuul"},"change":{"number":7,"url":"javascript:alert(1)"}}`,
			"openstack/nova change-merged", "change 7 by Zuul", "success", ""},
		{"configdb", "configdb/1/astute/values/nodes/node-1", `{"author":"deployer","changed":{"set":["a","b"],"deleted":["c"]}}`,
			"env 1: astute values at nodes=node-1", "set a, b; deleted c by deployer", "", ""},
		{"configdb", "configdb/components/3/created", `{"author":"anonymous"}`, "component 3 created", "by anonymous", "", ""},
		{"configdb", "configdb/1/environment/deleted", `{}`, "environment 1 deleted", "", "", ""},
		{"launchpad", "launchpad/octavia/bug/1680938", `{"status":"Triaged","importance":"Medium","bug-modifier":"Jane (jdev)"}`,
			"octavia bug 1680938", "Triaged · Medium · Jane (jdev)", "", ""},
		{"subunit", "gearman-subunit/w1/openstack/nova/12345", `{"status":"failure","source_url":"https://logs.example.org/x"}`,
			"openstack/nova change 12345: failure", "on w1", "failure", "https://logs.example.org/x"},
		{"gerrit", "gerrit/x/ref-updated", `not json`, "x ref-updated", "", "", ""},
	} {
		prefix := map[string]string{"gerrit": "gerrit", "configdb": "configdb", "launchpad": "launchpad", "subunit": "gearman-subunit"}[tt.source]
		c := summarise(tt.source, tt.topic, levels(tt.topic, prefix), []byte(tt.payload), 1)
		if c.Title != tt.title || c.Detail != tt.detail || c.State != tt.state || c.URL != tt.url {
			t.Errorf("%s: got %q / %q / %q / %q", tt.topic, c.Title, c.Detail, c.State, c.URL)
		}
	}
	if c := summarise("gerrit", "gerrit/a%2Fb/comment-added", levels("gerrit/a%2Fb/comment-added", "gerrit"), nil, 1); !strings.HasPrefix(c.Title, "a/b comment-added") {
		t.Errorf("escaped level: %q", c.Title)
	}
}
