package dashboard

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

const maxChanges = 300 // changes kept, newest first

// Change is one ConfigDB, Gerrit, Launchpad or CI event, summarised for a
// list: Title says what happened, Detail who or where, State colours it
// ("failure", "success" or "").
type Change struct {
	Source   string `json:"source"`
	Topic    string `json:"topic"`
	Title    string `json:"title"`
	Detail   string `json:"detail,omitempty"`
	State    string `json:"state,omitempty"`
	URL      string `json:"url,omitempty"`
	Received int64  `json:"received"` // Unix ms
}

type changes struct {
	mu      sync.Mutex
	list    []*Change // oldest first
	version uint64
}

func (c *changes) add(ch *Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, ch)
	if len(c.list) > maxChanges {
		c.list = append(c.list[:0], c.list[len(c.list)-maxChanges:]...)
	}
	c.version++
}

// ChangesSnapshot is the Changes view, newest first.
type ChangesSnapshot struct {
	Changes []*Change `json:"changes"`
	Version uint64    `json:"version"`
}

func (c *changes) snapshot() ChangesSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := ChangesSnapshot{Changes: make([]*Change, 0, len(c.list)), Version: c.version}
	for i := len(c.list) - 1; i >= 0; i-- {
		out.Changes = append(out.Changes, c.list[i])
	}
	return out
}

// summarise describes an event of source; rest are the topic's levels after
// the source's prefix, unescaped. It never fails: what it cannot read, it
// leaves out.
func summarise(source, topic string, rest []string, payload []byte, now int64) *Change {
	ch := &Change{Source: source, Topic: topic, Received: now}
	var m map[string]any
	_ = json.Unmarshal(payload, &m)
	get := func(path ...string) string {
		var v any = m
		for _, k := range path {
			o, ok := v.(map[string]any)
			if !ok {
				return ""
			}
			v = o[k]
		}
		switch v := v.(type) {
		case string:
			return v
		case float64:
			return fmt.Sprint(v)
		}
		return ""
	}
	switch source {
	case "configdb":
		// configdb/<env>/<resource>/<values|overrides>[/<level>/<value>]...,
		// configdb/<env>/environment/<event>, configdb/components/<id>/<event>
		ch.Title = strings.Join(rest, " ")
		if len(rest) >= 3 && rest[1] != "environment" && rest[0] != "components" {
			ch.Title = fmt.Sprintf("env %s: %s %s", rest[0], rest[1], rest[2])
			if len(rest) > 3 {
				var lv []string
				for i := 3; i+1 < len(rest); i += 2 {
					lv = append(lv, rest[i]+"="+rest[i+1])
				}
				ch.Title += " at " + strings.Join(lv, " ")
			}
			if set, ok := m["changed"].(map[string]any); ok {
				keys := func(k string) string {
					l, _ := set[k].([]any)
					var s []string
					for _, x := range l {
						s = append(s, fmt.Sprint(x))
					}
					return strings.Join(s, ", ")
				}
				if s := keys("set"); s != "" {
					ch.Detail = "set " + s
				}
				if s := keys("deleted"); s != "" {
					ch.Detail = strings.TrimPrefix(ch.Detail+"; deleted "+s, "; ")
				}
			}
		} else if len(rest) >= 3 {
			ch.Title = fmt.Sprintf("%s %s %s", strings.TrimSuffix(rest[0], "s"), rest[1], rest[2])
			if rest[1] == "environment" {
				ch.Title = fmt.Sprintf("environment %s %s", rest[0], rest[2])
			}
		}
		if a := get("author"); a != "" {
			ch.Detail = strings.TrimPrefix(ch.Detail+" by "+a, " ")
		}
	case "gerrit":
		typ := ""
		if len(rest) > 0 {
			typ = rest[len(rest)-1]
		}
		project := strings.Join(rest[:max(len(rest)-1, 0)], "/")
		ch.Title = project + " " + typ
		if s := get("change", "subject"); s != "" {
			ch.Title += ": " + s
		}
		who := get("uploader", "name")
		if who == "" {
			who = get("author", "name")
		}
		if who == "" {
			who = get("submitter", "name")
		}
		if n := get("change", "number"); n != "" {
			ch.Detail = "change " + n
		}
		if who != "" {
			ch.Detail = strings.TrimPrefix(ch.Detail+" by "+who, " ")
		}
		ch.URL = get("change", "url")
		switch typ {
		case "change-merged":
			ch.State = "success"
		case "change-abandoned":
			ch.State = "failure"
		}
	case "launchpad":
		ch.Title = strings.Join(rest, " ")
		if len(rest) >= 3 {
			ch.Title = fmt.Sprintf("%s %s %s", rest[0], rest[1], rest[2])
		}
		var parts []string
		for _, k := range []string{"status", "importance", "bug-modifier"} {
			if v := get(k); v != "" {
				parts = append(parts, v)
			}
		}
		ch.Detail = strings.Join(parts, " · ")
	case "subunit":
		// gearman-subunit/<worker>/<namespace>/<repo>/<change>
		ch.State = get("status")
		if len(rest) >= 4 {
			ch.Title = fmt.Sprintf("%s/%s change %s: %s", rest[1], rest[2], rest[3], ch.State)
			ch.Detail = "on " + rest[0]
		} else {
			ch.Title = strings.Join(rest, " ") + ": " + ch.State
		}
		ch.URL = get("source_url")
	}
	if !strings.HasPrefix(ch.URL, "https://") && !strings.HasPrefix(ch.URL, "http://") {
		ch.URL = "" // the page links it: never a javascript: or data: URL
	}
	return ch
}
