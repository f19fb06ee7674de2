package chef

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/opsfirehose/firehose/internal/jsonscan"
	"github.com/opsfirehose/firehose/payloads"
)

// NodeNamePattern is Chef's rule for node names ("About Nodes"). [:alnum:]
// is ASCII here, as in Chef Infra Server's check.
const NodeNamePattern = `^[\-[:alnum:]_:.]+$`

var nodeNameRE = regexp.MustCompile(NodeNamePattern)

// ValidNodeName reports whether name follows NodeNamePattern.
func ValidNodeName(name string) bool { return nodeNameRE.MatchString(name) }

// Member is one member of the top-level object, as written in the body.
type Member struct {
	// Key is the decoded key.
	Key string
	// Value is the raw value; it aliases the body at Offset.
	Value  []byte
	Offset int
	// KeyOffset is where the member starts: its key's opening quote.
	KeyOffset int
}

// Span is a raw JSON value inside a body: Raw aliases Body[Offset:].
type Span struct {
	Offset int
	Raw    []byte
}

// Message is one parsed message: *RunStart, *RunConverge, *Action,
// *Liveness or *Compliance. Every one keeps the original Body, which it
// aliases and never modifies.
type Message interface {
	Kind() Kind
	// Warnings are the problems found in a message that is published all
	// the same, sorted by field; nil when there are none.
	Warnings() []Warning
}

// checked holds a message's warnings.
type checked struct{ warnings []Warning }

// Warnings implements Message.
func (c *checked) Warnings() []Warning { return c.warnings }

// RunStart is a run_start message.
type RunStart struct {
	checked
	Body                              []byte
	NodeName, OrganizationName, RunID string
}

// RunConverge is a run_converge message: the end of a run. Optional fields
// are nil when the message has no string (or integer) there.
type RunConverge struct {
	checked
	Body                              []byte
	NodeName, OrganizationName, RunID string
	// Status is "success" or "failure".
	Status                                   string
	StartTime, EndTime, EntityUUID           *string
	PolicyName, PolicyGroup                  *string
	TotalResourceCount, UpdatedResourceCount *int64
	// ChefVersion is node.automatic.chef_packages.chef.version.
	ChefVersion *string
	// Error is the run's error object, when it has one.
	Error *RunError
	// Node is the node object; its Raw is nil when the message has none.
	Node Span
	// Resources are the object elements of resources, in order.
	Resources []Resource
	// Shadowed are the top-level "node" and "resources" members that a later
	// member of the same name overrides, in body order, each spanning from its
	// key to the next member's key (the comma included): cutting them all
	// leaves a body that decodes the same, the last duplicate winning, but
	// that no longer carries the overridden copies. Nil without duplicates.
	Shadowed []Span
	// cookbooks is the raw object of the node's cookbooks and their
	// versions (see Cookbooks), nil when the message has none.
	cookbooks []byte
	// members are the top-level members, for Cuts.
	members []Member
}

// RunError is the class and message of a failed run's error.
type RunError struct {
	Class, Message *string
	// Backtrace is the raw backtrace array, innermost frame first; nil when
	// the error has none.
	Backtrace []byte
}

// Resource is one resource record of a run_converge message.
type Resource struct {
	Span
	// Index is the record's position in the resources array.
	Index int
	// Status is how Chef processed the resource ("updated", "up-to-date",
	// ...), empty when the record has none.
	Status string
	// CookbookName is empty for a resource declared outside a cookbook.
	CookbookName string
}

// Action is an action message from Chef Infra Server (or an old chef-client).
type Action struct {
	checked
	Body []byte
	// OrganizationName is nil when the action belongs to no organization.
	OrganizationName                 *string
	EntityType, Task, EntityName, ID string
	RunID                            string
}

// Liveness is a liveness agent ping.
type Liveness struct {
	checked
	Body                       []byte
	NodeName, OrganizationName string
	EntityUUID, Timestamp      string
}

// Compliance is an InSpec report sent through the data collector.
type Compliance struct {
	checked
	Body                                   []byte
	NodeName, OrganizationName, ReportUUID string
	// Status is the report's verdict as Chef Automate computes it:
	// "passed", "failed", "skipped" or "waived" (Summary.Status).
	Status string
	// Summary is what Chef Automate shows of the report: the verdict and
	// the control counts, overall and per profile.
	Summary ComplianceSummary
	// cut are the spans of the body's own compliance_summary members.
	cut []Span
}

// Kind implements Message.
func (*RunStart) Kind() Kind { return KindRunStart }

// Kind implements Message.
func (*RunConverge) Kind() Kind { return KindRunConverge }

// Kind implements Message.
func (*Action) Kind() Kind { return KindAction }

// Kind implements Message.
func (*Liveness) Kind() Kind { return KindLiveness }

// Kind implements Message.
func (*Compliance) Kind() Kind { return KindCompliance }

// Parser parses and validates data-collector messages. It is safe for
// concurrent use.
type Parser struct {
	mode    Validation
	schemas map[Kind]*schema
}

// NewParser compiles the schemas of the mode.
func NewParser(mode Validation) (*Parser, error) {
	schemas, err := compileSchemas(mode)
	if err != nil {
		return nil, err
	}
	return &Parser{mode: mode, schemas: schemas}, nil
}

// Mode is the parser's validation mode.
func (p *Parser) Mode() Validation { return p.mode }

// Parse classifies body, checks it and extracts what topics and derived
// messages need. The body is read, never modified, and stays aliased by the
// result.
//
// In every mode, a message is refused (a *payloads.FieldError) when it cannot be
// published: not a JSON object, of no known kind, or without what its topic
// is built from: a node_name string for runs, pings and reports, a run's
// status "success" or "failure", an action's entity_type and task. An
// organization_name that is absent, null or not a string is published as
// "_", and so is an action without an entity_name. In ValidationStrict, a
// message that breaks the RFC's schema or Chef's node-name rule is refused
// too; in ValidationCompatible those problems are the message's Warnings.
func (p *Parser) Parse(body []byte) (Message, error) {
	doc, err := document(body)
	if err != nil {
		return nil, err
	}
	k := doc.classify()
	if k == KindUnknown {
		return nil, ErrUnknownType
	}
	var warns []Warning
	switch p.mode {
	case ValidationStrict:
		if err := rules(k, doc); err != nil {
			return nil, err
		}
		if s := p.schemas[k]; s != nil {
			if problems := s.validate(doc, false); len(problems) > 0 {
				return nil, problems[0].error()
			}
		}
	default:
		if err := topicRules(k, doc); err != nil {
			return nil, err
		}
		if p.mode == ValidationCompatible {
			warns = p.warnings(k, doc)
		}
	}
	var m Message
	switch k {
	case KindRunStart:
		m = &RunStart{checked: checked{warns}, Body: body, NodeName: doc.str("node_name"),
			OrganizationName: doc.str("organization_name"), RunID: doc.str("run_id")}
	case KindRunConverge:
		c := doc.converge(body)
		c.warnings = warns
		m = c
	case KindAction:
		m = &Action{checked: checked{warns}, Body: body, OrganizationName: doc.optStr("organization_name"),
			EntityType: doc.str("entity_type"), Task: doc.str("task"), EntityName: doc.str("entity_name"),
			ID: doc.str("id"), RunID: doc.str("run_id")}
	case KindLiveness:
		m = &Liveness{checked: checked{warns}, Body: body, NodeName: doc.str("node_name"),
			OrganizationName: doc.str("organization_name"), EntityUUID: doc.str("entity_uuid"), Timestamp: doc.str("@timestamp")}
	default: // KindCompliance
		profiles, _ := doc.get("profiles")
		var problems []Warning
		sum := complianceSummary(profiles, doc.str("status"), doc.str("status_message"), &problems)
		if p.mode == ValidationCompatible {
			warns = sortWarnings(append(warns, problems...))
		}
		m = &Compliance{checked: checked{warns}, Body: body, NodeName: doc.str("node_name"),
			OrganizationName: doc.str("organization_name"), ReportUUID: doc.str("report_uuid"),
			Status: sum.Status, Summary: sum, cut: doc.cuts(body, SummaryKey)}
	}
	return m, nil
}

// Classify returns the kind of body in Chef Automate's order: message_type
// run_start, run_converge or action; else event_type node_ping; else a
// top-level profiles key. It returns a *payloads.FieldError for a body that is not a JSON
// object, and ErrUnknownType for an object of no kind.
func Classify(body []byte) (Kind, error) {
	doc, err := document(body)
	if err != nil {
		return KindUnknown, err
	}
	if k := doc.classify(); k != KindUnknown {
		return k, nil
	}
	return KindUnknown, ErrUnknownType
}

// doc is the top-level object of a body, read in one pass. The pass also
// reads the two big members a converge needs inside, so that nothing is
// scanned twice: the records of "resources" and the chef version in "node".
type doc struct {
	members []Member
	// resources is the last "resources" member that is an array, or nil.
	resources *elements
	// node is the last "node" member, when it is an object.
	node *Member
	// chefVersion is node.automatic.chef_packages.chef.version, raw.
	chefVersion []byte
	// nodeCookbooks is node.automatic.cookbooks, raw.
	nodeCookbooks []byte
}

// elements are an array's elements with, for objects, their members.
type elements struct {
	offset int    // of the array in the body
	raw    []byte // the array
	items  []element
}

type element struct {
	Span
	index   int
	members []Member // nil when the element is not an object
}

// chefVersionPath is where node.automatic keeps the chef-client version.
var chefVersionPath = []string{"chef_packages", "chef", "version"}

// document checks the body's syntax, all of it, and lists its top-level members.
func document(body []byte) (*doc, error) {
	if len(jsonscan.Trim(body)) == 0 {
		return nil, &payloads.FieldError{Msg: "empty body: expected a JSON object"}
	}
	if jsonscan.Kind(body) != jsonscan.Object {
		if err := jsonscan.Check(body); err != nil {
			return nil, &payloads.FieldError{Msg: err.Error()}
		}
		return nil, &payloads.FieldError{Msg: "the body must be a JSON object"}
	}
	d := &doc{members: make([]Member, 0, 24)}
	it := jsonscan.Members(body)
	for it.Step() {
		key := jsonscan.Key(it.Key())
		off := it.Offset()
		switch {
		case key == "resources" && it.ValueKind() == jsonscan.Array:
			if child, ok := it.Enter(); ok {
				d.resources = readElements(&child, off)
				it.Leave(&child)
				d.resources.raw = it.Value()
			}
		case key == "node" && it.ValueKind() == jsonscan.Object:
			if child, ok := it.Enter(); ok {
				d.readNode(&child)
				it.Leave(&child)
			}
		default:
			it.SkipValue()
			// A later duplicate of another type wins, as when decoding.
			switch key {
			case "resources":
				d.resources = nil
			case "node":
				d.chefVersion, d.nodeCookbooks = nil, nil
			}
		}
		if it.Err() != nil {
			break
		}
		d.members = append(d.members, Member{Key: key, Value: it.Value(), Offset: off, KeyOffset: it.KeyOffset()})
	}
	if err := it.Err(); err != nil {
		return nil, &payloads.FieldError{Msg: err.Error()}
	}
	if len(jsonscan.Trim(body[it.End():])) != 0 {
		return nil, &payloads.FieldError{Msg: jsonscan.Check(body).Error()}
	}
	if n, ok := d.getMember("node"); ok && jsonscan.Kind(n.Value) == jsonscan.Object {
		d.node = &n
	}
	return d, nil
}

// readElements reads an array's elements, and the members of those that are
// objects, with offsets in the body (the array is at off).
func readElements(it *jsonscan.Iter, off int) *elements {
	es := &elements{offset: off}
	for it.Step() {
		e := element{index: it.Index()}
		start := off + it.Offset()
		if it.ValueKind() != jsonscan.Object {
			if !it.SkipValue() {
				return es
			}
		} else if obj, ok := it.Enter(); ok {
			e.members = make([]Member, 0, 16)
			for obj.Next() {
				e.members = append(e.members, Member{Key: resourceKey(obj.Key()), Value: obj.Value(), Offset: start + obj.Offset()})
			}
			it.Leave(&obj)
		}
		e.Span = Span{Offset: start, Raw: it.Value()}
		es.items = append(es.items, e)
	}
	return es
}

// resourceKey decodes a resource record's key, without allocating for the
// keys chef-client writes (a converge has a dozen per resource, thousands
// per message).
func resourceKey(raw []byte) string {
	switch string(raw) {
	case "type":
		return "type"
	case "name":
		return "name"
	case "id":
		return "id"
	case "after":
		return "after"
	case "before":
		return "before"
	case "duration":
		return "duration"
	case "delta":
		return "delta"
	case "ignore_failure":
		return "ignore_failure"
	case "result":
		return "result"
	case "status":
		return "status"
	case "cookbook_name":
		return "cookbook_name"
	case "cookbook_version":
		return "cookbook_version"
	case "recipe_name":
		return "recipe_name"
	case "conditional":
		return "conditional"
	case "error_message":
		return "error_message"
	case "error":
		return "error"
	}
	return jsonscan.Key(raw)
}

// readNode reads the node object it iterates to its end, keeping what a
// converge needs from node.automatic: the chef version and the cookbooks.
// The last duplicate wins at each step.
func (d *doc) readNode(it *jsonscan.Iter) {
	d.chefVersion, d.nodeCookbooks = nil, nil
	for it.Step() {
		if !jsonscan.KeyIs(it.Key(), "automatic") {
			it.SkipValue()
			continue
		}
		d.chefVersion, d.nodeCookbooks = nil, nil
		if it.ValueKind() != jsonscan.Object {
			it.SkipValue()
			continue
		}
		auto, ok := it.Enter()
		if !ok {
			continue
		}
		for auto.Step() {
			switch {
			case jsonscan.KeyIs(auto.Key(), "cookbooks"):
				d.nodeCookbooks = nil
				if auto.SkipValue() {
					d.nodeCookbooks = auto.Value()
				}
			case jsonscan.KeyIs(auto.Key(), chefVersionPath[0]):
				d.chefVersion = nil
				if auto.ValueKind() != jsonscan.Object {
					auto.SkipValue()
					continue
				}
				if child, ok := auto.Enter(); ok {
					d.chefVersion = findPath(&child, chefVersionPath[1:])
					auto.Leave(&child)
				}
			default:
				auto.SkipValue()
			}
		}
		it.Leave(&auto)
	}
}

// findPath reads the object it iterates to its end and returns the value at
// keys inside it, the last duplicate winning at each step, or nil.
func findPath(it *jsonscan.Iter, keys []string) []byte {
	var val []byte
	for it.Step() {
		if !jsonscan.KeyIs(it.Key(), keys[0]) {
			it.SkipValue()
			continue
		}
		val = nil
		if len(keys) == 1 {
			if it.SkipValue() {
				val = it.Value()
			}
			continue
		}
		if it.ValueKind() != jsonscan.Object {
			it.SkipValue()
			continue
		}
		if child, ok := it.Enter(); ok {
			val = findPath(&child, keys[1:])
			it.Leave(&child)
		}
	}
	return val
}

// get returns the last member named key, as a JSON decoder would.
func (d *doc) get(key string) ([]byte, bool) {
	for i := len(d.members) - 1; i >= 0; i-- {
		if d.members[i].Key == key {
			return d.members[i].Value, true
		}
	}
	return nil, false
}

func (d *doc) getMember(key string) (Member, bool) {
	for i := len(d.members) - 1; i >= 0; i-- {
		if d.members[i].Key == key {
			return d.members[i], true
		}
	}
	return Member{}, false
}

// str is the member's string value, "" when it is absent or not a string.
func (d *doc) str(key string) string {
	v, _ := d.get(key)
	s, _ := jsonscan.Str(v)
	return s
}

// optStr is the member's string value, nil when it is absent or not a string.
func (d *doc) optStr(key string) *string {
	v, _ := d.get(key)
	return optStr(v)
}

func optStr(v []byte) *string {
	if s, ok := jsonscan.Str(v); ok {
		return &s
	}
	return nil
}

func (d *doc) classify() Kind {
	if v, ok := d.get("message_type"); ok {
		switch s, _ := jsonscan.Str(v); s {
		case "run_start":
			return KindRunStart
		case "run_converge":
			return KindRunConverge
		case "action":
			return KindAction
		}
	}
	if v, ok := d.get("event_type"); ok {
		if s, _ := jsonscan.Str(v); s == "node_ping" {
			return KindLiveness
		}
	}
	if _, ok := d.get("profiles"); ok {
		return KindCompliance
	}
	return KindUnknown
}

// The fields each kind's topic and de-duplication id are built from.
var topicFields = map[Kind][]string{
	KindRunStart:    {"node_name", "organization_name", "run_id"},
	KindRunConverge: {"node_name", "organization_name", "run_id", "status"},
	KindAction:      {"entity_type", "task", "entity_name"},
	KindLiveness:    {"node_name"},
	KindCompliance:  {"node_name"},
}

// optionalTopicFields become "_" in the topic when absent or null.
var optionalTopicFields = map[Kind][]string{
	KindAction:     {"organization_name"},
	KindLiveness:   {"organization_name"},
	KindCompliance: {"organization_name"},
}

// rules are ValidationStrict's checks besides the schema: what topics are
// built from, present and non-empty, and Chef's node-name rule.
func rules(k Kind, d *doc) error {
	if err := requireStrings(d, topicFields[k], ""); err != nil {
		return err
	}
	for _, f := range optionalTopicFields[k] {
		if v, ok := d.get(f); ok && jsonscan.Kind(v) != jsonscan.Null && jsonscan.Kind(v) != jsonscan.String {
			return fieldError(f, "%s must be a string or null, got %s", f, kindName(v))
		}
	}
	if nodeKind(k) {
		if name := d.str("node_name"); !ValidNodeName(name) {
			return nodeNameProblem(name).error()
		}
	}
	if k == KindCompliance {
		if v, _ := d.get("profiles"); jsonscan.Kind(v) != jsonscan.Array && jsonscan.Kind(v) != jsonscan.Null {
			return fieldError("profiles", "profiles must be an array, got %s", kindName(v))
		}
	}
	return shapeRules(k, d)
}

// topicRules are the checks of ValidationCompatible and ValidationOff: only
// what a topic cannot be built without.
func topicRules(k Kind, d *doc) error {
	required := []string{"node_name"}
	switch k {
	case KindAction:
		required = []string{"entity_type", "task"}
	case KindRunConverge:
		required = []string{"node_name", "status"}
	}
	if err := requireStrings(d, required, ": the topic is built from it"); err != nil {
		return err
	}
	return shapeRules(k, d)
}

// requireStrings checks that each field is a non-empty string; why ends
// the message of a missing or empty one.
func requireStrings(d *doc, fields []string, why string) error {
	for _, f := range fields {
		v, ok := d.get(f)
		if !ok || jsonscan.Kind(v) == jsonscan.Null {
			return fieldError(f, "missing %s%s", f, why)
		}
		s, isStr := jsonscan.Str(v)
		if !isStr {
			return fieldError(f, "%s must be a string, got %s", f, kindName(v))
		}
		if s == "" {
			return fieldError(f, "%s is empty%s", f, why)
		}
	}
	return nil
}

// shapeRules are the checks of every mode on values a topic level is made
// of: a run's status is one of two words.
func shapeRules(k Kind, d *doc) error {
	if k == KindRunConverge {
		if s := d.str("status"); s != "success" && s != "failure" {
			return fieldError("status", "status must be \"success\" or \"failure\", got %q", s)
		}
	}
	return nil
}

// nodeKind reports whether k's topics are under the node's level.
func nodeKind(k Kind) bool {
	return k == KindRunStart || k == KindRunConverge || k == KindLiveness || k == KindCompliance
}

func nodeNameProblem(name string) problem {
	return problem{Warning{Field: "node_name", Reason: ReasonNodeName,
		Msg: fmt.Sprintf("node_name %q does not follow Chef's rule %s", name, NodeNamePattern)}}
}

// warnings are ValidationCompatible's findings: the compatible schema, the
// node-name rule, and organization_name where no schema looks at it.
func (p *Parser) warnings(k Kind, d *doc) []Warning {
	var out []Warning
	if nodeKind(k) {
		if name := d.str("node_name"); !ValidNodeName(name) {
			out = append(out, nodeNameProblem(name).Warning)
		}
	}
	if s := p.schemas[k]; s != nil {
		// A missing organization_name is null, here as in topics.
		for _, pr := range s.validate(d, true) {
			if pr.Reason == ReasonNodeName && len(out) > 0 && out[0].Reason == ReasonNodeName {
				continue // the schema's format says what the rule said
			}
			out = append(out, pr.Warning)
		}
		return sortWarnings(out)
	}
	if v, ok := d.get("organization_name"); ok && jsonscan.Kind(v) != jsonscan.Null && jsonscan.Kind(v) != jsonscan.String {
		out = append(out, Warning{Field: "organization_name", Reason: ReasonOrganization,
			Msg: "organization_name must be a string or null, got " + kindName(v) + "; published under _"})
	}
	if k == KindCompliance {
		out = append(out, reportWarnings(d)...)
	}
	return sortWarnings(out)
}

// problem is a Warning that ValidationStrict turns into a *payloads.FieldError.
type problem struct{ Warning }

func (p problem) error() *payloads.FieldError {
	return &payloads.FieldError{Field: p.Field, Msg: p.Msg}
}

// sortWarnings orders warnings by field, then message, so that answers are
// stable; nil when there are none.
func sortWarnings(ws []Warning) []Warning {
	if len(ws) == 0 {
		return nil
	}
	slices.SortStableFunc(ws, func(a, b Warning) int {
		if c := strings.Compare(a.Field, b.Field); c != 0 {
			return c
		}
		return strings.Compare(a.Msg, b.Msg)
	})
	return ws
}

// kindName names the JSON type of v for messages; "nothing" for a field that
// is missing (v is empty).
func kindName(v []byte) string {
	if name := jsonscan.KindName(jsonscan.Kind(v)); name != "" {
		return name
	}
	return "nothing"
}

func (d *doc) converge(body []byte) *RunConverge {
	c := &RunConverge{
		Body:                 body,
		NodeName:             d.str("node_name"),
		OrganizationName:     d.str("organization_name"),
		RunID:                d.str("run_id"),
		Status:               d.str("status"),
		StartTime:            d.optStr("start_time"),
		EndTime:              d.optStr("end_time"),
		EntityUUID:           d.optStr("entity_uuid"),
		PolicyName:           d.optStr("policy_name"),
		PolicyGroup:          d.optStr("policy_group"),
		TotalResourceCount:   d.optInt("total_resource_count"),
		UpdatedResourceCount: d.optInt("updated_resource_count"),
	}
	if d.node != nil {
		c.Node = Span{Offset: d.node.Offset, Raw: d.node.Value}
		c.ChefVersion = optStr(d.chefVersion)
	}
	c.Shadowed = d.shadowed(body, "node", "resources")
	c.members = d.members
	c.cookbooks = d.nodeCookbooks
	if jsonscan.Kind(c.cookbooks) != jsonscan.Object {
		c.cookbooks = nil
		if v, _ := d.get("cookbooks"); jsonscan.Kind(v) == jsonscan.Object {
			c.cookbooks = v
		}
	}
	if v, ok := d.get("error"); ok && jsonscan.Kind(v) == jsonscan.Object {
		class, _ := jsonscan.Get(v, "class")
		msg, _ := jsonscan.Get(v, "message")
		bt, _ := jsonscan.Get(v, "backtrace")
		if jsonscan.Kind(bt) != jsonscan.Array {
			bt = nil
		}
		c.Error = &RunError{Class: optStr(class), Message: optStr(msg), Backtrace: bt}
	}
	if d.resources != nil {
		c.Resources = make([]Resource, 0, len(d.resources.items))
		for _, e := range d.resources.items {
			if e.members == nil {
				continue
			}
			res := Resource{Span: e.Span, Index: e.index}
			// The last duplicate wins, as when decoding.
			for _, m := range e.members {
				switch m.Key {
				case "status":
					res.Status, _ = jsonscan.Str(m.Value)
				case "cookbook_name":
					res.CookbookName, _ = jsonscan.Str(m.Value)
				}
			}
			c.Resources = append(c.Resources, res)
		}
	}
	return c
}

// shadowed returns the members named one of keys that a later member of the
// same name overrides, each from its key to the next member's key.
func (d *doc) shadowed(body []byte, keys ...string) []Span {
	var out []Span
	for i, m := range d.members {
		if !slices.Contains(keys, m.Key) {
			continue
		}
		for _, later := range d.members[i+1:] {
			if later.Key == m.Key {
				// A later member exists, so member i+1 does.
				end := d.members[i+1].KeyOffset
				out = append(out, Span{Offset: m.KeyOffset, Raw: body[m.KeyOffset:end]})
				break
			}
		}
	}
	return out
}

// cuts returns the spans that remove every top-level member named key from
// body, commas included, so that what is left is still one JSON object.
func (d *doc) cuts(body []byte, keys ...string) []Span {
	return cutMembers(body, d.members, keys)
}

// Cuts returns the spans that remove every top-level member named one of
// keys from the body, commas included, in body order: cutting them leaves
// one JSON object, to which a caller can append members of those names
// without a decoder reading the sender's own.
func (c *RunConverge) Cuts(keys ...string) []Span {
	return cutMembers(c.Body, c.members, keys)
}

func cutMembers(body []byte, members []Member, keys []string) []Span {
	n := len(members)
	tail := n // the trailing run of members to cut starts here
	for tail > 0 && slices.Contains(keys, members[tail-1].Key) {
		tail--
	}
	var out []Span
	for i := 0; i < tail; i++ {
		if m := members[i]; slices.Contains(keys, m.Key) { // up to the next member's key
			out = append(out, Span{Offset: m.KeyOffset, Raw: body[m.KeyOffset:members[i+1].KeyOffset]})
		}
	}
	if tail < n {
		last := members[n-1]
		from := members[tail].KeyOffset
		if tail > 0 { // from the end of the last member kept, its comma cut
			prev := members[tail-1]
			from = prev.Offset + len(prev.Value)
		}
		out = append(out, Span{Offset: from, Raw: body[from : last.Offset+len(last.Value)]})
	}
	return out
}

// optInt is the member's value when it is an integer that fits in int64.
func (d *doc) optInt(key string) *int64 {
	v, _ := d.get(key)
	if jsonscan.Kind(v) != jsonscan.Number {
		return nil
	}
	n, err := strconv.ParseInt(string(jsonscan.Trim(v)), 10, 64)
	if err != nil {
		return nil
	}
	return &n
}
