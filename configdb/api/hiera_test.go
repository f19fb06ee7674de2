package api

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// hieraConfig is the part of a Hiera 5 hiera.yaml the example uses.
type hieraConfig struct {
	Version  int `yaml:"version"`
	Defaults struct {
		LookupKey string `yaml:"lookup_key"`
		Options   struct {
			Output    string            `yaml:"output"`
			Ignore404 bool              `yaml:"ignore_404"`
			Headers   map[string]string `yaml:"headers"`
		} `yaml:"options"`
	} `yaml:"defaults"`
	Hierarchy []struct {
		Name string `yaml:"name"`
		URI  string `yaml:"uri"`
	} `yaml:"hierarchy"`
}

// TestHieraExample loads hiera/hiera.yaml and looks keys up as hiera_http
// does (first level with the key wins; 404 falls through), against the API
// holding a Fuel node's data.
func TestHieraExample(t *testing.T) {
	raw, err := os.ReadFile("hiera/hiera.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var h hieraConfig
	if err := yaml.Unmarshal(raw, &h); err != nil {
		t.Fatal(err)
	}
	if h.Version != 5 || h.Defaults.LookupKey != "hiera_http" || h.Defaults.Options.Output != "json" || !h.Defaults.Options.Ignore404 || len(h.Hierarchy) != 4 {
		t.Fatalf("%+v", h)
	}
	eachDB(t, func(t *testing.T, dsn string) {
		token := h.Defaults.Options.Headers["X-Auth-Token"]
		s := startServer(t, dsn, serverOptions{cfg: func(c *Config) {
			c.Auth.Tokens = []Token{{Name: "deployer", Token: "w", Role: RoleWriter}, {Name: "hiera", Token: token, Role: RoleReader}}
		}})
		s.headers["X-Auth-Token"] = "w"
		s.fuelSetup()
		node := "/environments/1/nodes/node-1.domain.tld/resources/"
		s.must(204, "PUT", node+"astute/values", map[string]any{"deployment_id": 1, "debug": false, "fqdn": "node-1.domain.tld"})
		s.must(204, "PUT", node+"astute/overrides", map[string]any{"deployment_id": 2})
		s.must(204, "PUT", node+"globals/values", map[string]any{"use_syslog": true, "management_vip": "192.168.0.10"})
		s.must(204, "PUT", "/environments/1/resources/override/plugins/values", map[string]any{"use_syslog": false})
		s.must(204, "PUT", node+"override/node/values", map[string]any{"debug": true})

		lookup := func(certname, key string) (any, bool) {
			for _, level := range h.Hierarchy {
				uri := strings.NewReplacer("%{facts.fuel_env_id}", "1", "%{trusted.certname}", certname).Replace(level.URI)
				uri = strings.Replace(uri, "http://configdb.example.com:8080/api/v1/config", s.url, 1)
				req, _ := http.NewRequest("GET", uri, nil)
				for k, v := range h.Defaults.Options.Headers {
					req.Header.Set(k, v)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 404 {
					continue
				}
				if resp.StatusCode != 200 {
					t.Fatalf("%s: %s %s", level.Name, resp.Status, body)
				}
				var doc map[string]any
				if err := json.Unmarshal(body, &doc); err != nil {
					t.Fatalf("%s: %v", level.Name, err)
				}
				if v, ok := doc[key]; ok {
					return v, true
				}
			}
			return nil, false
		}
		for key, want := range map[string]any{
			"deployment_id":  2.0,            // astute, with the node's override
			"debug":          true,           // override/node comes before astute
			"use_syslog":     false,          // override/plugins (environment-wide) before globals
			"management_vip": "192.168.0.10", // globals
			"fqdn":           "node-1.domain.tld",
		} {
			if got, ok := lookup("node-1.domain.tld", key); !ok || got != want {
				t.Errorf("%s = %v (found %v), want %v", key, got, ok, want)
			}
		}
		if _, ok := lookup("node-1.domain.tld", "nope"); ok {
			t.Error("an unknown key was found")
		}
		// Another node gets the environment-wide data only.
		if got, ok := lookup("node-2.domain.tld", "use_syslog"); !ok || got != false {
			t.Errorf("node-2 use_syslog = %v, %v", got, ok)
		}
		if _, ok := lookup("node-2.domain.tld", "deployment_id"); ok {
			t.Error("node-2 sees node-1's data")
		}
	})
}
