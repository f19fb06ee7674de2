package dashboard

import (
	"encoding/json"
	"sort"
	"strings"
	"sync"

	"github.com/opsfirehose/firehose/internal/ellipsis"
)

// Limits of what the Ansible view remembers: the bus keeps no Ansible
// history, so this is all the page can show of plays that ran before it opened.
const (
	maxPlays       = 60  // plays kept; the oldest finished one goes first
	maxPlayTasks   = 40  // latest task results kept per play
	maxPlayFailed  = 40  // failed or unreachable results kept per play
	maxTaskStream  = 200 // latest task results of all plays
	maxMessageSize = 400 // bytes of a task's message shown, "…" included; cut at a character boundary
)

// Play is one ansible-playbook run, by its playbook uuid.
type Play struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Controller string `json:"controller,omitempty"`
	// Status is "running" until the finish event, then "OK" or "FAILED".
	Status   string           `json:"status"`
	Started  int64            `json:"started"` // Unix ms, when the dashboard saw its first event
	Finished int64            `json:"finished,omitempty"`
	Updated  int64            `json:"updated"`
	Hosts    map[string]*Host `json:"-"`
	HostList []*Host          `json:"hosts"`
	Tasks    []*Task          `json:"tasks"`  // newest first
	Failed   []*Task          `json:"failed"` // newest first
}

// Host counts one host's results in a play. Before its stats arrive they are
// counted from task results; the stats, when they come, replace them.
type Host struct {
	Name        string `json:"name"`
	OK          int    `json:"ok"`
	Changed     int    `json:"changed"`
	Failed      int    `json:"failed"`
	Unreachable int    `json:"unreachable"`
	Skipped     int    `json:"skipped"`
	Final       bool   `json:"final"` // from the play's stats
}

// Task is one task result.
type Task struct {
	Play     string `json:"play"`
	PlayName string `json:"play_name"`
	Host     string `json:"host"`
	Task     string `json:"task"`
	Status   string `json:"status"`
	Changed  bool   `json:"changed,omitempty"`
	Message  string `json:"message,omitempty"`
	Received int64  `json:"received"` // Unix ms
	Topic    string `json:"topic"`
}

type ansibleEvent struct {
	Status       string          `json:"status"`
	Host         string          `json:"host"`
	AnsibleHost  string          `json:"ansible_host"`
	PlaybookName string          `json:"playbook_name"`
	Task         string          `json:"ansible_task"`
	Result       json.RawMessage `json:"ansible_result"`
	Stats        *struct {
		OK          int `json:"ok"`
		Failures    int `json:"failures"`
		Unreachable int `json:"unreachable"`
		Changed     int `json:"changed"`
		Skipped     int `json:"skipped"`
	} `json:"stats"`
}

// plays is the Ansible view's state.
type plays struct {
	mu      sync.Mutex
	byID    map[string]*Play
	stream  []*Task // newest last, at most maxTaskStream
	version uint64
}

func newPlays() *plays { return &plays{byID: map[string]*Play{}} }

// apply records one event: kind is "start", "finish", "stats" or "task"; host
// and status come from the topic, where the payload lacks them.
func (p *plays) apply(topic, id, kind, host, status string, payload []byte, now int64) {
	var ev ansibleEvent
	if json.Unmarshal(payload, &ev) != nil {
		return
	}
	if ev.AnsibleHost != "" {
		host = ev.AnsibleHost
	}
	if ev.Status != "" {
		status = ev.Status
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.version++
	pl := p.byID[id]
	if pl == nil {
		pl = &Play{ID: id, Status: "running", Started: now, Updated: now, Hosts: map[string]*Host{}}
		p.byID[id] = pl
		p.evict()
	}
	pl.Updated = now
	if ev.PlaybookName != "" {
		pl.Name = ev.PlaybookName
	}
	if ev.Host != "" && kind != "stats" {
		pl.Controller = ev.Host
	}
	switch kind {
	case "start":
		if pl.Status != "running" { // a second play in the same run
			pl.Status, pl.Finished = "running", 0
		}
	case "finish":
		pl.Status, pl.Finished = strings.ToUpper(status), now
	case "stats":
		if ev.Stats == nil {
			return
		}
		h := pl.host(host)
		*h = Host{Name: host, OK: ev.Stats.OK, Changed: ev.Stats.Changed, Failed: ev.Stats.Failures,
			Unreachable: ev.Stats.Unreachable, Skipped: ev.Stats.Skipped, Final: true}
	case "task":
		t := &Task{Play: id, PlayName: pl.Name, Host: host, Task: strings.TrimPrefix(ev.Task, "TASK: "),
			Status: strings.ToUpper(status), Received: now, Topic: topic}
		t.Changed, t.Message = resultSummary(ev.Result, t.Status)
		h := pl.host(host)
		if !h.Final {
			switch t.Status {
			case "OK":
				h.OK++
				if t.Changed {
					h.Changed++
				}
			case "FAILED":
				h.Failed++
			case "UNREACHABLE":
				h.Unreachable++
			case "SKIPPED":
				h.Skipped++
			}
		}
		pl.Tasks = prepend(pl.Tasks, t, maxPlayTasks)
		if t.Status == "FAILED" || t.Status == "UNREACHABLE" {
			pl.Failed = prepend(pl.Failed, t, maxPlayFailed)
		}
		p.stream = append(p.stream, t)
		if len(p.stream) > maxTaskStream {
			p.stream = append(p.stream[:0], p.stream[len(p.stream)-maxTaskStream:]...)
		}
	}
}

func (pl *Play) host(name string) *Host {
	h := pl.Hosts[name]
	if h == nil {
		h = &Host{Name: name}
		pl.Hosts[name] = h
	}
	return h
}

func prepend(list []*Task, t *Task, max int) []*Task {
	list = append([]*Task{t}, list...)
	if len(list) > max {
		list = list[:max]
	}
	return list
}

// evict drops the least recently updated plays beyond maxPlays, finished ones first.
func (p *plays) evict() {
	for len(p.byID) > maxPlays {
		var victim *Play
		for _, pl := range p.byID {
			if victim == nil || betterVictim(pl, victim) {
				victim = pl
			}
		}
		delete(p.byID, victim.ID)
	}
}

func betterVictim(a, b *Play) bool {
	if fa, fb := a.Status != "running", b.Status != "running"; fa != fb {
		return fa
	}
	return a.Updated < b.Updated
}

// resultSummary reads whether a result changed something and what it says:
// msg, else stderr, else the return code of a failure.
func resultSummary(raw json.RawMessage, status string) (changed bool, msg string) {
	var r struct {
		Changed bool   `json:"changed"`
		Msg     any    `json:"msg"`
		Stderr  string `json:"stderr"`
		RC      *int   `json:"rc"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return false, ""
	}
	switch m := r.Msg.(type) {
	case string:
		msg = m
	case nil:
	default:
		b, _ := json.Marshal(m)
		msg = string(b)
	}
	if msg == "" && status != "OK" {
		msg = r.Stderr
	}
	if msg == "" && status == "FAILED" && r.RC != nil {
		b, _ := json.Marshal(*r.RC)
		msg = "rc " + string(b)
	}
	return r.Changed, ellipsis.Cut(msg, maxMessageSize)
}

// AnsibleSnapshot is the Ansible view.
type AnsibleSnapshot struct {
	Plays   []Play  `json:"plays"`
	Stream  []*Task `json:"stream"` // newest first
	Version uint64  `json:"version"`
}

// snapshot copies the plays, running ones first, then the latest finished.
func (p *plays) snapshot(limit int) AnsibleSnapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := AnsibleSnapshot{Plays: []Play{}, Stream: make([]*Task, 0, len(p.stream)), Version: p.version}
	list := make([]*Play, 0, len(p.byID))
	for _, pl := range p.byID {
		list = append(list, pl)
	}
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if ra, rb := a.Status == "running", b.Status == "running"; ra != rb {
			return ra
		}
		if a.Updated != b.Updated {
			return a.Updated > b.Updated
		}
		return a.ID < b.ID
	})
	if len(list) > limit {
		list = list[:limit]
	}
	for _, pl := range list {
		c := *pl
		c.Hosts = nil
		c.HostList = make([]*Host, 0, len(pl.Hosts))
		for _, h := range pl.Hosts {
			hc := *h
			c.HostList = append(c.HostList, &hc)
		}
		sort.Slice(c.HostList, func(i, j int) bool {
			a, b := c.HostList[i], c.HostList[j]
			if fa, fb := a.Failed+a.Unreachable > 0, b.Failed+b.Unreachable > 0; fa != fb {
				return fa
			}
			return a.Name < b.Name
		})
		c.Tasks = append([]*Task(nil), pl.Tasks...)
		c.Failed = append([]*Task{}, pl.Failed...)
		if c.Tasks == nil {
			c.Tasks = []*Task{}
		}
		out.Plays = append(out.Plays, c)
	}
	for i := len(p.stream) - 1; i >= 0; i-- {
		out.Stream = append(out.Stream, p.stream[i])
	}
	return out
}
