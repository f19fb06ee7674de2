package topics

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxLevelBytes is the longest a data level may be once escaped. MQTT itself
// only limits the whole topic; this limit keeps one oversized field (a
// runaway node name) from producing topics that subscribers and NATS choke
// on, and reports it as that field's fault.
const MaxLevelBytes = 1024

// ErrTooLong is wrapped by a [*LevelError] when an escaped data level is longer
// than [MaxLevelBytes] or the whole topic longer than [MaxTopicBytes].
var ErrTooLong = errors.New("topic too long")

// LevelError is the error of every topic builder. Level names the input at
// fault: the builder's parameter in snake_case ("node", "entity_name",
// "playbook_id"), "levels[i].name" or "levels[i].value" for a ConfigDB level,
// or "prefix" for a bad or oversized configured prefix, so that an HTTP
// adapter can answer 400 {"error": ..., "field": ...} after mapping it to its
// own JSON field.
type LevelError struct {
	// Level is the name of the input field that could not become a level.
	Level string
	// Err says why; it wraps [ErrTooLong] or [ErrInvalidPrefix].
	Err error
}

// Error returns "<level>: <reason>".
func (e *LevelError) Error() string { return e.Level + ": " + e.Err.Error() }

// Unwrap returns Err, so that errors.Is(err, ErrTooLong) works.
func (e *LevelError) Unwrap() error { return e.Err }

// Default prefixes: the first level of each source's topics when its Prefix is
// empty. They are the OpenStack firehose's, so its subscribers keep working.
//
// Each is the one level of the DESIGN.md topic table for its source.
const (
	DefaultChefPrefix      = "chef"
	DefaultAnsiblePrefix   = "ansible"
	DefaultConfigDBPrefix  = "configdb"
	DefaultGerritPrefix    = "gerrit"
	DefaultLaunchpadPrefix = "launchpad"
	DefaultSubunitPrefix   = "gearman-subunit"
)

// ConfigDB kinds, the level after the resource in [ConfigDB.Values].
const (
	// KindValues is for a resource's effective values.
	KindValues = "values"
	// KindOverrides is for the overrides set on a level of the hierarchy.
	KindOverrides = "overrides"
)

// Fixed words of the topic table. They are written as they are, never escaped,
// so they must stay plain levels.
const (
	wordRun         = "run"
	wordStart       = "start"
	wordStatus      = "status"
	wordResource    = "resource"
	wordAction      = "action"
	wordLiveness    = "liveness"
	wordCompliance  = "compliance"
	wordTeam        = "team"
	wordFailure     = "failure"
	wordCookbook    = "cookbook"
	wordVersions    = "versions"
	wordPlaybook    = "playbook"
	wordFinish      = "finish"
	wordStats       = "stats"
	wordTask        = "task"
	wordEnvironment = "environment"
	wordComponents  = "components"
)

// part is one piece of a topic under construction. A part with an empty field
// is a fixed word; otherwise value comes from data and is escaped. A path part
// is split at '/' into several escaped levels (Gerrit project paths).
type part struct {
	field string
	value string
	path  bool
	// index, when positive, is 1 + the position of a ConfigDB level pair, for
	// naming the field in errors without formatting on the happy path.
	index int
	// n is the escaped length measured by build. Escaping only ever adds
	// bytes, so n == len(value) means the value is written as it is.
	n int
}

func word(w string) part            { return part{value: w} }
func data(field, value string) part { return part{field: field, value: value} }

// name is the field name reported in a LevelError.
func (p part) name() string {
	if p.index > 0 {
		return "levels[" + strconv.Itoa(p.index-1) + "]." + p.field
	}
	return p.field
}

// build joins prefix (or def when prefix is empty) and parts into a topic. It
// measures first so that the result is allocated once, and so that limits are
// checked before anything is written.
func build(prefix, def string, parts []part) (string, error) {
	if prefix == "" {
		prefix = def
	} else if err := ValidPrefix(prefix); err != nil {
		return "", &LevelError{Level: "prefix", Err: err}
	}
	n := len(prefix)
	// blame is the part named when the topic grows too long: the latest data
	// part, since fixed words are nobody's input, or the prefix before any.
	blame := -1
	for i := range parts {
		p := &parts[i]
		if p.field != "" {
			blame = i
		}
		var l int
		switch {
		case p.field == "":
			l = len(p.value)
		case p.path:
			var err error
			if l, err = pathLen(p.value); err != nil {
				return "", &LevelError{Level: p.name(), Err: err}
			}
		default:
			l = escapedLen(p.value)
			if l > MaxLevelBytes {
				return "", &LevelError{Level: p.name(), Err: levelTooLong(l)}
			}
			p.n = l
		}
		n += 1 + l
		if n > MaxTopicBytes {
			level := "prefix"
			if blame >= 0 {
				level = parts[blame].name()
			}
			return "", &LevelError{Level: level, Err: fmt.Errorf(
				"topic would be more than %d bytes: %w", MaxTopicBytes, ErrTooLong)}
		}
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(prefix)
	for i := range parts {
		p := &parts[i]
		b.WriteByte('/')
		switch {
		case p.field == "" || (!p.path && p.n == len(p.value)):
			b.WriteString(p.value)
		case p.path:
			writePath(&b, p.value)
		default:
			writeEscaped(&b, p.value)
		}
	}
	return b.String(), nil
}

func levelTooLong(n int) error {
	return fmt.Errorf("level is %d bytes escaped, limit %d: %w", n, MaxLevelBytes, ErrTooLong)
}

// pathLen returns the length of path written by writePath, or an error when a
// segment is too long.
func pathLen(path string) (int, error) {
	n := 0
	for rest, more := path, true; more; {
		var seg string
		seg, rest, more = nextLevel(rest)
		l := escapedLen(seg)
		if l > MaxLevelBytes {
			return 0, levelTooLong(l)
		}
		n += l
		if more {
			n++
		}
		if n > MaxTopicBytes {
			// Stop early: the caller reports the topic as too long.
			return n, nil
		}
	}
	return n, nil
}

// writePath writes each '/'-separated segment of path as an escaped level.
func writePath(b *strings.Builder, path string) {
	for rest, more := path, true; more; {
		var seg string
		seg, rest, more = nextLevel(rest)
		writeEscaped(b, seg)
		if more {
			b.WriteByte('/')
		}
	}
}

// Chef builds the topics of the Chef data collector adapter. Its zero value
// uses [DefaultChefPrefix]. Every data argument is escaped as one level, so an
// org, node or cookbook name can hold any bytes; status values are written as
// Chef reports them.
type Chef struct {
	// Prefix replaces "chef" as the first level(s); it must pass
	// ValidPrefix, or builders fail with a LevelError for "prefix".
	Prefix string
}

// RunStart returns chef/<org>/<node>/run/start.
func (c Chef) RunStart(org, node string) (string, error) {
	return build(c.Prefix, DefaultChefPrefix, []part{
		data("org", org), data("node", node), word(wordRun), word(wordStart)})
}

// RunEnd returns chef/<org>/<node>/run/<status>, status being "success" or
// "failure" as the run reports it.
func (c Chef) RunEnd(org, node, status string) (string, error) {
	return build(c.Prefix, DefaultChefPrefix, []part{
		data("org", org), data("node", node), word(wordRun), data("status", status)})
}

// Status returns chef/<org>/<node>/status, the retained summary of the node's
// last run.
func (c Chef) Status(org, node string) (string, error) {
	return build(c.Prefix, DefaultChefPrefix, []part{
		data("org", org), data("node", node), word(wordStatus)})
}

// Resource returns chef/<org>/<node>/resource/<cookbook>/<status>.
func (c Chef) Resource(org, node, cookbook, status string) (string, error) {
	return build(c.Prefix, DefaultChefPrefix, []part{
		data("org", org), data("node", node), word(wordResource),
		data("cookbook", cookbook), data("status", status)})
}

// Action returns chef/<org>/action/<entity_type>/<task>/<entity_name>.
func (c Chef) Action(org, entityType, task, entityName string) (string, error) {
	return build(c.Prefix, DefaultChefPrefix, []part{
		data("org", org), word(wordAction), data("entity_type", entityType),
		data("task", task), data("entity_name", entityName)})
}

// Liveness returns chef/<org>/<node>/liveness.
func (c Chef) Liveness(org, node string) (string, error) {
	return build(c.Prefix, DefaultChefPrefix, []part{
		data("org", org), data("node", node), word(wordLiveness)})
}

// Compliance returns chef/<org>/<node>/compliance/<status>, status being
// Chef Automate's verdict: "passed", "failed", "skipped" or "waived".
func (c Chef) Compliance(org, node, status string) (string, error) {
	return build(c.Prefix, DefaultChefPrefix, []part{
		data("org", org), data("node", node), word(wordCompliance), data("status", status)})
}

// TeamFailure returns chef/<org>/team/<team>/failure/<node>: a failed run
// whose failing cookbook the team owns.
func (c Chef) TeamFailure(org, team, node string) (string, error) {
	return build(c.Prefix, DefaultChefPrefix, []part{
		data("org", org), word(wordTeam), data("team", team), word(wordFailure), data("node", node)})
}

// CookbookRollout returns chef/<org>/cookbook/<cookbook>/<version>/<status>:
// a node's first run with that version of the cookbook, status being the
// run's "success" or "failure".
func (c Chef) CookbookRollout(org, cookbook, version, status string) (string, error) {
	return build(c.Prefix, DefaultChefPrefix, []part{
		data("org", org), word(wordCookbook), data("cookbook", cookbook), data("version", version), data("status", status)})
}

// CookbookVersions returns chef/<org>/cookbook/<cookbook>/versions, the
// retained tally of the cookbook's versions across the org's nodes.
func (c Chef) CookbookVersions(org, cookbook string) (string, error) {
	return build(c.Prefix, DefaultChefPrefix, []part{
		data("org", org), word(wordCookbook), data("cookbook", cookbook), word(wordVersions)})
}

// Ansible builds the topics of the Ansible callback plugin adapter, those of
// the OpenStack firehose's MQTT plugin. Its zero value uses
// [DefaultAnsiblePrefix].
type Ansible struct {
	// Prefix replaces "ansible" as the first level(s); it must pass
	// ValidPrefix.
	Prefix string
}

// PlayStart returns ansible/playbook/<playbook_id>/action/start.
func (a Ansible) PlayStart(playbookID string) (string, error) {
	return build(a.Prefix, DefaultAnsiblePrefix, []part{
		word(wordPlaybook), data("playbook_id", playbookID), word(wordAction), word(wordStart)})
}

// Finish returns ansible/playbook/<playbook_id>/action/finish/<status>, status
// being "OK" or "FAILED".
func (a Ansible) Finish(playbookID, status string) (string, error) {
	return build(a.Prefix, DefaultAnsiblePrefix, []part{
		word(wordPlaybook), data("playbook_id", playbookID), word(wordAction),
		word(wordFinish), data("status", status)})
}

// Stats returns ansible/playbook/<playbook_id>/stats/<host>.
func (a Ansible) Stats(playbookID, host string) (string, error) {
	return build(a.Prefix, DefaultAnsiblePrefix, []part{
		word(wordPlaybook), data("playbook_id", playbookID), word(wordStats), data("host", host)})
}

// Task returns ansible/playbook/<playbook_id>/task/<host>/<status>, status
// being "OK", "FAILED" or "UNREACHABLE".
func (a Ansible) Task(playbookID, host, status string) (string, error) {
	return build(a.Prefix, DefaultAnsiblePrefix, []part{
		word(wordPlaybook), data("playbook_id", playbookID), word(wordTask),
		data("host", host), data("status", status)})
}

// ConfigDB builds the topics of the ConfigDB API. Its zero value uses
// [DefaultConfigDBPrefix].
type ConfigDB struct {
	// Prefix replaces "configdb" as the first level(s); it must pass
	// ValidPrefix.
	Prefix string
}

// LevelValue is one level of the ConfigDB hierarchy, such as {"nodes",
// "node-1"}.
type LevelValue struct {
	Name, Value string
}

// maxStackParts covers every topic whose ConfigDB hierarchy is up to 6 levels
// deep without a second allocation.
const maxStackParts = 3 + 2*6

// Values returns configdb/<env>/<resource>/<kind>[/<level>/<value>]..., kind
// being [KindValues] or [KindOverrides]. Each argument is one escaped level,
// so a resource named "override/plugins" stays one level
// ("override%2Fplugins"). Errors about levels name "levels[i].name" or
// "levels[i].value".
func (c ConfigDB) Values(env, resource, kind string, levels []LevelValue) (string, error) {
	var buf [maxStackParts]part
	parts := append(buf[:0], data("env", env), data("resource", resource), data("kind", kind))
	for i, lv := range levels {
		parts = append(parts,
			part{field: "name", value: lv.Name, index: i + 1},
			part{field: "value", value: lv.Value, index: i + 1})
	}
	return build(c.Prefix, DefaultConfigDBPrefix, parts)
}

// Environment returns configdb/<env>/environment/<event>, event being
// "created", "updated" or "deleted".
func (c ConfigDB) Environment(env, event string) (string, error) {
	return build(c.Prefix, DefaultConfigDBPrefix, []part{
		data("env", env), word(wordEnvironment), data("event", event)})
}

// Component returns configdb/components/<id>/<event>, event being "created",
// "updated" or "deleted".
func (c ConfigDB) Component(id, event string) (string, error) {
	return build(c.Prefix, DefaultConfigDBPrefix, []part{
		word(wordComponents), data("id", id), data("event", event)})
}

// Gerrit builds the topics of germqtt-style Gerrit events. Its zero value
// uses [DefaultGerritPrefix].
type Gerrit struct {
	// Prefix replaces "gerrit" as the first level(s); it must pass
	// ValidPrefix.
	Prefix string
}

// Event returns gerrit/<project path>/<event_type>. Unlike every other data
// value, the project keeps its tree: each '/'-separated segment becomes an
// escaped level ("openstack/nova" gives gerrit/openstack/nova/comment-added),
// and an empty segment becomes "_", as the OpenStack firehose's subscribers
// expect.
func (g Gerrit) Event(project, eventType string) (string, error) {
	return build(g.Prefix, DefaultGerritPrefix, []part{
		{field: "project", value: project, path: true}, data("event_type", eventType)})
}

// Launchpad builds the topics of lpmqtt-style Launchpad bug events. Its zero
// value uses [DefaultLaunchpadPrefix].
type Launchpad struct {
	// Prefix replaces "launchpad" as the first level(s); it must pass
	// ValidPrefix.
	Prefix string
}

// Event returns launchpad/<project>/<event_type>/<bug_number>, filled left to
// right and stopping at the first empty field, as lpmqtt does: project ""
// gives just "launchpad", and event type "" gives launchpad/<project>.
func (l Launchpad) Event(project, eventType, bugNumber string) (string, error) {
	parts := []part{data("project", project), data("event_type", eventType), data("bug_number", bugNumber)}
	n := 0
	for n < len(parts) && parts[n].value != "" {
		n++
	}
	return build(l.Prefix, DefaultLaunchpadPrefix, parts[:n])
}

// Subunit builds the topics of the subunit gearman workers. Its zero value
// uses [DefaultSubunitPrefix].
type Subunit struct {
	// Prefix replaces "gearman-subunit" as the first level(s); it must pass
	// ValidPrefix.
	Prefix string
}

// Result returns
// gearman-subunit/<worker_host>/<git_namespace>/<repo>/<change>.
func (s Subunit) Result(workerHost, gitNamespace, repo, change string) (string, error) {
	return build(s.Prefix, DefaultSubunitPrefix, []part{
		data("worker_host", workerHost), data("git_namespace", gitNamespace),
		data("repo", repo), data("change", change)})
}
