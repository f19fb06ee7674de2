package dashboardtest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/topics"
)

// A fleet as a platform team sees it: a few orgs, policies per role, three
// policy groups, and the failures Chef really reports.
var (
	orgs     = []string{"ops", "payments", "search"}
	roles    = []struct{ policy, prefix string }{{"base", "util"}, {"web", "web"}, {"mysql", "db"}, {"kafka", "kafka"}, {"haproxy", "lb"}, {"elasticsearch", "es"}, {"monitoring", "mon"}}
	groups   = []string{"prod", "prod", "prod", "staging", "dev"}
	sites    = []string{"fra1", "ams2", "iad1"}
	failures = []struct{ class, message string }{
		{"Mixlib::ShellOut::ShellCommandFailed", "Expected process to exit with [0], but received '1' ---- Begin output of systemctl restart nginx ---- Job for nginx.service failed because the control process exited with error code."},
		{"Chef::Exceptions::Package", "No candidate version available for mysql-server-8.0"},
		{"Net::HTTPClientException", "404 \"Not Found\": cookbook haproxy 6.4.1 not found in policy group prod"},
		{"Errno::ENOSPC", "No space left on device @ io_write - /var/cache/chef/cookbooks/elasticsearch/files/default/jvm.options"},
		{"Chef::Exceptions::ValidationFailed", "Option version must be a kind of String! You passed 7.17."},
		{"Chef::Exceptions::Exec", "/usr/share/kafka/bin/kafka-topics.sh --describe returned 1, expected 0"},
	}
)

// Node is one generated node.
type Node struct {
	Org, Name, Policy, Group string
}

// Fleet returns n nodes, the same for the same seed.
func Fleet(n int, seed uint64) []Node {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	nodes := make([]Node, n)
	for i := range nodes {
		role := roles[r.IntN(len(roles))]
		group := groups[r.IntN(len(groups))]
		nodes[i] = Node{
			Org:    orgs[i%len(orgs)],
			Name:   fmt.Sprintf("%s-%s-%03d.%s.example.net", role.prefix, sites[r.IntN(len(sites))], i/len(orgs)+1, group),
			Policy: role.policy,
			Group:  group,
		}
	}
	return nodes
}

// Status is the retained chef/<org>/<node>/status message the Chef adapter
// publishes after a run that ended at end, failed or not.
func Status(n Node, end time.Time, failed bool, r *rand.Rand) bus.Message {
	dur := time.Duration(20+r.IntN(160)) * time.Second
	total := 150 + r.IntN(300)
	p := map[string]any{
		"node_name": n.Name, "organization_name": n.Org,
		"run_id":                 fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", r.Uint32(), r.IntN(1<<16), r.IntN(1<<12), r.IntN(1<<12), r.Uint64()&(1<<48-1)),
		"status":                 "success",
		"start_time":             end.Add(-dur).UTC().Format(time.RFC3339),
		"end_time":               end.UTC().Format(time.RFC3339),
		"duration_ms":            dur.Milliseconds(),
		"total_resource_count":   total,
		"updated_resource_count": r.IntN(4),
		"failed_resource_count":  0,
		"policy_name":            n.Policy,
		"policy_group":           n.Group,
		"chef_version":           []string{"18.4.12", "18.5.0", "17.10.3"}[r.IntN(3)],
		"entity_uuid":            fmt.Sprintf("%08x-0000-4000-8000-%012x", r.Uint32(), r.Uint64()&(1<<48-1)),
	}
	if failed {
		f := failures[r.IntN(len(failures))]
		p["status"], p["failed_resource_count"], p["error_class"], p["error_message"] = "failure", 1, f.class, f.message
		p["updated_resource_count"] = r.IntN(total / 4)
	}
	body, _ := json.Marshal(p)
	topic, err := topics.Chef{}.Status(n.Org, n.Name)
	if err != nil {
		panic(err)
	}
	return bus.Message{Topic: topic, Payload: body, QoS: 1, Retain: true}
}

// Statuses returns the status of every node of Fleet(n, seed), about one in
// failEvery of them failed, each run ending within the last hour before now.
func Statuses(n int, seed uint64, failEvery int, now time.Time) []bus.Message {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([]bus.Message, 0, n)
	for _, node := range Fleet(n, seed) {
		end := now.Add(-time.Duration(r.IntN(3600)) * time.Second)
		out = append(out, Status(node, end, failEvery > 0 && r.IntN(failEvery) == 0, r))
	}
	return out
}

// Play is the callback plugin's events for one ansible-playbook run: a
// start, each host's result of each task (failHost fails the task named
// failTask, with failMsg), each host's stats and the finish; with finished
// false it stops before the stats, as a play still running.
func Play(id, name, controller string, hosts, tasks []string, failHost, failTask, failMsg string, finished bool) []map[string]any {
	session := "5e55a1a0-0000-4000-8000-" + id[len(id)-12:]
	evs := []map[string]any{{"status": "OK", "host": controller, "session": session, "playbook_name": name, "playbook_id": id, "ansible_type": "start"}}
	failedHosts := map[string]bool{}
	stats := map[string]map[string]int{}
	for _, h := range hosts {
		stats[h] = map[string]int{"ok": 0, "failures": 0, "unreachable": 0, "changed": 0, "skipped": 0, "rescued": 0, "ignored": 0}
	}
	for ti, task := range tasks {
		for hi, h := range hosts {
			if failedHosts[h] {
				continue
			}
			status, result := "OK", map[string]any{"changed": (ti+hi)%3 == 0}
			if h == failHost && task == failTask {
				status, result = "FAILED", map[string]any{"changed": false, "msg": failMsg}
				failedHosts[h] = true
				stats[h]["failures"]++
			} else {
				stats[h]["ok"]++
				if result["changed"] == true {
					stats[h]["changed"]++
				}
			}
			evs = append(evs, map[string]any{"status": status, "host": controller, "ansible_host": h, "session": session,
				"ansible_type": "task", "playbook_name": name, "playbook_id": id, "ansible_task": "TASK: " + task, "ansible_result": result})
		}
	}
	if !finished {
		return evs
	}
	final := "OK"
	for _, h := range hosts {
		evs = append(evs, map[string]any{"host": controller, "ansible_host": h, "playbook_id": id, "playbook_name": name, "stats": stats[h]})
		if failedHosts[h] {
			final = "FAILED"
		}
	}
	return append(evs, map[string]any{"playbook_id": id, "playbook_name": name, "status": final})
}
