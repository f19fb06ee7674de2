package chef

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/opsfirehose/firehose/bus"
	"github.com/opsfirehose/firehose/internal/jsonscan"
	"github.com/opsfirehose/firehose/payloads"
	chefpayload "github.com/opsfirehose/firehose/payloads/chef"
	"github.com/opsfirehose/firehose/topics"
)

// Source is the Firehose-Source header of every Chef message.
const Source = "chef"

// De-duplication id suffixes of the messages derived from a run_converge.
const (
	idStatus   = "status"
	idResource = "resource"
)

// builder turns parsed messages into bus messages. It is immutable once made
// (the ownership it reads reloads itself, atomically).
type builder struct {
	topics   topics.Chef
	statuses map[string]bool
	levels   map[string]levelRules
	redact   *redactor
	// owners is nil when no team owns anything.
	owners *owners
}

// build returns every bus message one data-collector message produces, or an
// *payloads.FieldError when a topic cannot be built from it. A converge's
// rollout events are given by the caller, who tracks versions.
func (b *builder) build(m chefpayload.Message, now time.Time, rollout []rolloutEvent) ([]bus.Message, error) {
	switch m := m.(type) {
	case *chefpayload.RunStart:
		t, err := b.topics.RunStart(m.OrganizationName, m.NodeName)
		if err != nil {
			return nil, topicError(err, "")
		}
		return []bus.Message{bus.NewMessage(Source, dedupID(m.RunID, m.Body, m.Kind()), t, m.Body, now)}, nil
	case *chefpayload.RunConverge:
		return b.converge(m, now, rollout)
	case *chefpayload.Action:
		org := ""
		if m.OrganizationName != nil {
			org = *m.OrganizationName
		}
		t, err := b.topics.Action(org, m.EntityType, m.Task, m.EntityName)
		if err != nil {
			return nil, topicError(err, "")
		}
		id := m.ID
		if id == "" {
			id = m.RunID
		}
		return []bus.Message{bus.NewMessage(Source, dedupID(id, m.Body, m.Kind()), t, m.Body, now)}, nil
	case *chefpayload.Liveness:
		t, err := b.topics.Liveness(m.OrganizationName, m.NodeName)
		if err != nil {
			return nil, topicError(err, "")
		}
		// A ping has no run id; its body (entity, timestamp) is what a retry repeats.
		return []bus.Message{bus.NewMessage(Source, dedupID("", m.Body, m.Kind()), t, m.Body, now)}, nil
	case *chefpayload.Compliance:
		t, err := b.topics.Compliance(m.OrganizationName, m.NodeName, m.Status)
		if err != nil {
			return nil, topicError(err, "")
		}
		// Report ids travel with copies of a report (Chef Automate's own
		// test data has distinct reports under one), so the id also digests
		// the body as received, which a retry repeats.
		sum := sha256.Sum256(m.Body)
		id := m.ReportUUID + ":" + hex.EncodeToString(sum[:8])
		return []bus.Message{bus.NewMessage(Source, dedupID(id, nil, m.Kind()), t, m.Published(), now)}, nil
	}
	return nil, chefpayload.ErrUnknownType
}

// converge makes the run's end message, one message per resource whose
// status is configured, the owning team's failure message, the rollout
// events, and the retained status summary, in that order.
func (b *builder) converge(c *chefpayload.RunConverge, now time.Time, rollout []rolloutEvent) ([]bus.Message, error) {
	runEnd, err := b.topics.RunEnd(c.OrganizationName, c.NodeName, c.Status)
	if err != nil {
		return nil, topicError(err, "")
	}
	statusTopic, err := b.topics.Status(c.OrganizationName, c.NodeName)
	if err != nil {
		return nil, topicError(err, "")
	}
	blame := c.Blame()
	var owner string
	if blame != nil {
		owner = b.owners.owner(blame.Name)
	}
	payload, records := b.rewrite(c, blame, owner)
	msgs := make([]bus.Message, 0, 3+len(c.Resources)+len(rollout))
	msgs = append(msgs, bus.NewMessage(Source, dedupID(c.RunID, nil, c.Kind()), runEnd, payload, now))

	head := resourceHead(c)
	failed := 0
	for i, r := range c.Resources {
		if r.Status == "failed" {
			failed++
		}
		if !b.statuses[r.Status] {
			continue
		}
		t, err := b.topics.Resource(c.OrganizationName, c.NodeName, r.CookbookName, r.Status)
		if err != nil {
			return nil, topicError(err, "resources["+strconv.Itoa(r.Index)+"]")
		}
		p := make([]byte, 0, len(head)+len(records[i])+16)
		p = append(append(append(p, head...), records[i]...), '}')
		id := c.RunID + ":" + idResource + ":" + strconv.Itoa(r.Index)
		msgs = append(msgs, bus.NewMessage(Source, id, t, p, now))
	}
	if owner != "" {
		m, err := b.teamFailure(c, blame, owner, now)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	for _, ev := range rollout {
		m, err := b.rolloutEvent(c, ev, blame, now)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}

	status := bus.NewMessage(Source, c.RunID+":"+idStatus, statusTopic, summary(c, failed, blame, owner), now)
	status.Retain = true
	return append(msgs, status), nil
}

// splice replaces Body[off:off+n] with data.
type splice struct {
	off, n int
	data   []byte
}

// rewrite applies the attribute lists and redaction, and gives a failed
// run's body the failed cookbook and its owner as its last members. With
// neither list nor redaction configured, a successful run's body and
// resource records are returned as they are: nothing is copied. With either,
// it also drops the top-level "node" and "resources" members that a later
// duplicate overrides: they are not what the message means (the last
// duplicate wins), and filtering only the last would publish the others
// with their secrets.
func (b *builder) rewrite(c *chefpayload.RunConverge, blame *chefpayload.FailedCookbook, owner string) (payload []byte, records [][]byte) {
	records = make([][]byte, len(c.Resources))
	for i, r := range c.Resources {
		records[i] = r.Raw
	}
	var splices []splice
	redactKeys := b.redact != nil && b.redact.keys != nil
	if len(b.levels) > 0 || b.redact.on() {
		for _, s := range c.Shadowed {
			splices = append(splices, splice{off: s.Offset, n: len(s.Raw)})
		}
	}
	if c.Node.Raw != nil && (len(b.levels) > 0 || redactKeys) {
		it := jsonscan.Members(c.Node.Raw)
		for it.Next() {
			level := jsonscan.Key(it.Key())
			if !slices.Contains(levels, level) {
				continue
			}
			v := it.Value()
			nv := v
			if rules, ok := b.levels[level]; ok {
				nv = rules.apply(nv)
			}
			nv = b.redact.attributes(nv)
			splices = append(splices, splice{off: c.Node.Offset + it.Offset(), n: len(v), data: nv})
		}
	}
	if b.redact.on() {
		for i, r := range c.Resources {
			records[i] = b.redact.resource(r.Raw)
			splices = append(splices, splice{off: r.Offset, n: len(r.Raw), data: records[i]})
		}
	}
	if c.Status == "failure" {
		for _, cut := range c.Cuts(chefpayload.FailedCookbookKey, chefpayload.OwnerKey) {
			splices = append(splices, splice{off: cut.Offset, n: len(cut.Raw)})
		}
		splices = append(splices, splice{off: closingBrace(c.Body), data: blameMembers(blame, owner)})
	}
	if len(splices) == 0 {
		return c.Body, records
	}
	slices.SortFunc(splices, func(x, y splice) int { return x.off - y.off })
	size := len(c.Body)
	for _, s := range splices {
		size += len(s.data) - s.n
	}
	out := make([]byte, 0, size)
	at := 0
	for _, s := range splices {
		out = append(append(out, c.Body[at:s.off]...), s.data...)
		at = s.off + s.n
	}
	return append(out, c.Body[at:]...), records
}

// closingBrace is the offset of the top-level object's closing brace: the
// last byte that is not space (Parse checked the body).
func closingBrace(body []byte) int {
	i := len(body) - 1
	for i > 0 && body[i] != '}' {
		i--
	}
	return i
}

// blameMembers are the members a failed run's body gains, after its last
// one: ,"failed_cookbook":{…}|null,"owner":"<team>"|null.
func blameMembers(blame *chefpayload.FailedCookbook, owner string) []byte {
	out := []byte(`,"` + chefpayload.FailedCookbookKey + `":`)
	out = appendJSON(out, blame)
	out = append(out, `,"`+chefpayload.OwnerKey+`":`...)
	return appendOptString(out, optOwner(owner))
}

func optOwner(owner string) *string {
	if owner == "" {
		return nil
	}
	return &owner
}

// appendJSON appends v encoded, HTML characters as they are.
func appendJSON(dst []byte, v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the adapter's own types: strings and numbers only
	return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

// resourceHead is the start of every resource message of a run, up to the
// record: {"run_id":…,"node_name":…,"organization_name":…,"policy_name":…,
// "policy_group":…,"resource":
func resourceHead(c *chefpayload.RunConverge) []byte {
	h := make([]byte, 0, 256)
	h = append(h, `{"run_id":`...)
	h = jsonscan.AppendString(h, c.RunID)
	h = append(h, `,"node_name":`...)
	h = jsonscan.AppendString(h, c.NodeName)
	h = append(h, `,"organization_name":`...)
	h = jsonscan.AppendString(h, c.OrganizationName)
	h = append(h, `,"policy_name":`...)
	h = appendOptString(h, c.PolicyName)
	h = append(h, `,"policy_group":`...)
	h = appendOptString(h, c.PolicyGroup)
	return append(h, `,"resource":`...)
}

func appendOptString(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	return jsonscan.AppendString(dst, *s)
}

func summary(c *chefpayload.RunConverge, failed int, blame *chefpayload.FailedCookbook, owner string) []byte {
	s := chefpayload.Summary{
		NodeName:             c.NodeName,
		OrganizationName:     c.OrganizationName,
		RunID:                c.RunID,
		Status:               c.Status,
		StartTime:            c.StartTime,
		EndTime:              c.EndTime,
		TotalResourceCount:   c.TotalResourceCount,
		UpdatedResourceCount: c.UpdatedResourceCount,
		FailedResourceCount:  failed,
		PolicyName:           c.PolicyName,
		PolicyGroup:          c.PolicyGroup,
		ChefVersion:          c.ChefVersion,
		EntityUUID:           c.EntityUUID,
		FailedCookbook:       blame,
		Owner:                optOwner(owner),
	}
	if c.StartTime != nil && c.EndTime != nil {
		start, err1 := time.Parse(time.RFC3339, *c.StartTime)
		end, err2 := time.Parse(time.RFC3339, *c.EndTime)
		if err1 == nil && err2 == nil {
			ms := end.Sub(start).Milliseconds()
			s.DurationMS = &ms
		}
	}
	if c.Status == "failure" && c.Error != nil {
		s.ErrorClass, s.ErrorMessage = c.Error.Class, c.Error.Message
	}
	return appendJSON(nil, s)
}

// dedupID is the message's Nats-Msg-Id: the run (or message, or report) id
// and the kind, which a sender's retry repeats. Without an id, the body's
// digest stands in for it.
func dedupID(id string, body []byte, k chefpayload.Kind) string {
	if id == "" {
		sum := sha256.Sum256(body)
		id = "sha256-" + hex.EncodeToString(sum[:])
	}
	return id + ":" + k.String()
}

// topicError turns a topic builder's error into a 400 naming the JSON field
// at fault; prefix is the resource path for resource topics.
func topicError(err error, prefix string) error {
	var le *topics.LevelError
	if !errors.As(err, &le) {
		return &payloads.FieldError{Msg: err.Error()}
	}
	field := le.Level
	switch le.Level {
	case "org":
		field = "organization_name"
	case "node":
		field = "node_name"
	case "cookbook":
		field = "cookbook_name"
	}
	if prefix != "" && (le.Level == "cookbook" || le.Level == "status") {
		field = prefix + "." + field
	}
	return &payloads.FieldError{Field: field, Msg: field + ": " + le.Err.Error()}
}
