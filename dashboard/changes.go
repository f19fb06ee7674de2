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
	// Only the fields a summary shows are decoded: a Gerrit event or a
	// Launchpad mail carries much more, and every one of them passes here.
	var m summaryFields
	_ = json.Unmarshal(payload, &m)
	get := func(path ...string) string {
		switch strings.Join(path, ".") {
		case "author":
			return m.Author.String()
		case "change.subject":
			return m.Change.Subject.String()
		case "change.number":
			return m.Change.Number.String()
		case "change.url":
			return m.Change.URL.String()
		case "uploader.name":
			return m.Uploader.Name.String()
		case "author.name":
			return m.Author.Name()
		case "submitter.name":
			return m.Submitter.Name.String()
		case "status":
			return m.Status.String()
		case "importance":
			return m.Importance.String()
		case "bug-modifier":
			return m.BugModifier.String()
		case "source_url":
			return m.SourceURL.String()
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
			if s := joinKeys(m.Changed.Set); s != "" {
				ch.Detail = "set " + s
			}
			if s := joinKeys(m.Changed.Deleted); s != "" {
				ch.Detail = strings.TrimPrefix(ch.Detail+"; deleted "+s, "; ")
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

// text is a JSON string or number, or nothing for anything else.
type text string

func (t *text) UnmarshalJSON(b []byte) error {
	var v any
	if json.Unmarshal(b, &v) == nil {
		switch v := v.(type) {
		case string:
			*t = text(v)
		case float64:
			*t = text(fmt.Sprint(v))
		}
	}
	return nil
}

func (t text) String() string { return string(t) }

// person is a Gerrit account, or ConfigDB's author, which is a plain string.
type person struct {
	plain text
	named struct {
		Name text `json:"name"`
	}
}

func (p *person) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '{' {
		_ = json.Unmarshal(b, &p.named)
		return nil
	}
	return p.plain.UnmarshalJSON(b)
}

func (p person) String() string { return string(p.plain) }
func (p person) Name() string   { return string(p.named.Name) }

type summaryFields struct {
	Author   person `json:"author"`
	Uploader struct {
		Name text `json:"name"`
	} `json:"uploader"`
	Submitter struct {
		Name text `json:"name"`
	} `json:"submitter"`
	Change struct {
		Subject text `json:"subject"`
		Number  text `json:"number"`
		URL     text `json:"url"`
	} `json:"change"`
	Changed struct {
		Set     []any `json:"set"`
		Deleted []any `json:"deleted"`
	} `json:"changed"`
	Status      text `json:"status"`
	Importance  text `json:"importance"`
	BugModifier text `json:"bug-modifier"`
	SourceURL   text `json:"source_url"`
}

func joinKeys(l []any) string {
	var s []string
	for _, x := range l {
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, ", ")
}
