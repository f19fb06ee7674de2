package chef

import (
	"encoding/json"
	"fmt"
	"iter"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/opsfirehose/firehose/internal/jsonscan"
)

// Compliance verdicts, the last level of a compliance topic: Chef Automate's
// report statuses.
const (
	CompliancePassed  = "passed"
	ComplianceFailed  = "failed"
	ComplianceSkipped = "skipped"
	ComplianceWaived  = "waived"
)

// SummaryKey is the top-level member that the published compliance report
// gains: its ComplianceSummary.
const SummaryKey = "compliance_summary"

// ComplianceSummary is what Chef Automate shows of a report: its verdict and
// control counts, overall and per profile. The field names are those of
// Automate's summary documents.
type ComplianceSummary struct {
	// Status is the verdict: passed, failed, skipped or waived.
	Status string `json:"status"`
	// StatusMessage is the report's own status_message, given when the
	// verdict is the report's own "failed" (InSpec could not run).
	StatusMessage string `json:"status_message,omitempty"`
	// ControlsSums counts the controls of every profile counted.
	ControlsSums ControlsSums `json:"controls_sums"`
	// Profiles are the profiles counted, in report order: those no other
	// profile depends on (the others' controls are counted in theirs).
	Profiles []ProfileSummary `json:"profiles"`
}

// ProfileSummary is one profile of a ComplianceSummary.
type ProfileSummary struct {
	Name string `json:"name"`
	// Status is the profile's status as the report gives it ("skipped",
	// "failed"), or computed from its controls when the report gives
	// "loaded" or none.
	Status       string       `json:"status"`
	ControlsSums ControlsSums `json:"controls_sums"`
}

// ControlsSums are control counts. A waived control counts as waived
// whatever its results; every other control counts once by status.
type ControlsSums struct {
	Total   int          `json:"total"`
	Passed  Total        `json:"passed"`
	Skipped Total        `json:"skipped"`
	Failed  FailedTotals `json:"failed"`
	Waived  Total        `json:"waived"`
}

// Total is one count.
type Total struct {
	Total int `json:"total"`
}

// FailedTotals split failed controls by impact: minor below 0.4, major below
// 0.7, critical from 0.7.
type FailedTotals struct {
	Total    int `json:"total"`
	Minor    int `json:"minor"`
	Major    int `json:"major"`
	Critical int `json:"critical"`
}

func (s *ControlsSums) add(o ControlsSums) {
	s.Total += o.Total
	s.Passed.Total += o.Passed.Total
	s.Skipped.Total += o.Skipped.Total
	s.Failed.Total += o.Failed.Total
	s.Failed.Minor += o.Failed.Minor
	s.Failed.Major += o.Failed.Major
	s.Failed.Critical += o.Failed.Critical
	s.Waived.Total += o.Waived.Total
}

// verdict is Automate's status from counts: failed if any control failed,
// skipped if every control was skipped, waived if every one was waived,
// else passed (no controls: passed).
func (s *ControlsSums) verdict() string {
	switch {
	case s.Failed.Total > 0:
		return ComplianceFailed
	case s.Total > 0 && s.Total == s.Skipped.Total:
		return ComplianceSkipped
	case s.Total > 0 && s.Total == s.Waived.Total:
		return ComplianceWaived
	}
	return CompliancePassed
}

// Published returns the body with Summary appended as its last top-level
// member, SummaryKey; a member of that name in the body is removed first, so
// that no decoder reads a sender's own. The body itself is not modified.
func (c *Compliance) Published() []byte {
	sum, _ := json.Marshal(c.Summary) // strings and numbers only: cannot fail
	end := len(c.Body)
	for end > 0 && c.Body[end-1] != '}' {
		end-- // the object's closing brace; Parse checked the rest is space
	}
	end--
	out := make([]byte, 0, len(c.Body)+len(SummaryKey)+len(sum)+4)
	at := 0
	for _, s := range c.cut {
		out = append(out, c.Body[at:s.Offset]...)
		at = s.Offset + len(s.Raw)
	}
	out = append(out, c.Body[at:end]...)
	if jsonscan.Trim(out)[len(jsonscan.Trim(out))-1] != '{' {
		out = append(out, ',')
	}
	out = append(append(append(out, `"`+SummaryKey+`":`...), sum...), c.Body[end:]...)
	return out
}

// The bounds of reading a report: how many shape problems are reported, and
// how many steps and controls the profile-dependency walk may take, since
// dependencies can loop or fan out (Automate's own walk then recurses until
// its stack overflows, or takes exponential time).
const (
	maxReportProblems = 10
	maxDepWalk        = 1 << 16
	maxDepDepth       = 32
)

// report is what the verdict reads of an InSpec report's profiles.
type report struct {
	profiles []*profile
	problems *[]Warning
	walked   int
	// short is set once the dependency walk was cut short.
	short bool
}

// cutShort reports, once, that the dependency walk stopped early.
func (r *report) cutShort(format string, args ...any) {
	if !r.short {
		r.short = true
		r.problem("profiles", format, args...)
	}
}

type profile struct {
	name, status, parent string
	depends              []string
	controls             []*control
}

type control struct {
	id     string
	impact float32
	// results is the raw results array; nil when absent or null, as the
	// decoded slice Automate merges into is nil.
	results []byte
	waived  bool
}

// complianceSummary computes a report's summary exactly as Chef Automate's
// compliance ingest does (compliance-service: FixInheritedProfiles, then
// ComplianceShared with ProfileControlSummary and ReportComplianceStatus):
//
//  1. A profile that another profile depends on (its name is in some
//     profile's depends), or that names a parent_profile, is not counted:
//     its controls are its wrapper's. A wrapper's control without results
//     takes those of the first control with the same id found through its
//     dependencies.
//  2. A control is waived when its waiver_data has any field set and its
//     message does not start with "Waiver expired"; otherwise it has failed
//     if a result failed, is skipped if a result was skipped, else passed.
//  3. A profile's status is the report's, if it gives one other than
//     "loaded"; else it is computed from its controls as in 4.
//  4. The report: its own status "failed" with no profiles counted gives
//     failed (InSpec could not run); else failed if a profile's given status
//     is "failed" (it could not load); else skipped if every profile's is
//     "skipped"; else failed if no profile is counted; else from the counts:
//     failed if a control failed, skipped if all were skipped, waived if all
//     were waived, else passed.
//
// Values of the wrong type read as absent; each is reported in problems (up
// to maxReportProblems), since Automate refuses such a report. Where Automate
// decodes duplicate keys inside a report by merging, the last one wins here.
func complianceSummary(profiles []byte, status, statusMessage string, problems *[]Warning) ComplianceSummary {
	r := report{problems: problems}
	r.read(profiles)
	kept := r.fixInherited()

	out := ComplianceSummary{Profiles: make([]ProfileSummary, 0, len(kept))}
	skipped, failed := 0, 0
	for _, p := range kept {
		sums := p.sums()
		ps := p.status
		switch ps {
		case "", "loaded":
			ps = sums.verdict()
		case ComplianceSkipped:
			skipped++
		case ComplianceFailed:
			failed++
		}
		out.Profiles = append(out.Profiles, ProfileSummary{Name: p.name, Status: ps, ControlsSums: sums})
		out.ControlsSums.add(sums)
	}
	switch {
	case status == ComplianceFailed && len(kept) == 0:
		out.Status, out.StatusMessage = ComplianceFailed, statusMessage
	case failed > 0:
		out.Status = ComplianceFailed
	case skipped > 0 && skipped == len(kept):
		out.Status = ComplianceSkipped
	case len(kept) == 0:
		out.Status = ComplianceFailed
	default:
		out.Status = out.ControlsSums.verdict()
	}
	return out
}

func (r *report) problem(field, format string, args ...any) {
	if r.problems == nil || len(*r.problems) >= maxReportProblems {
		return
	}
	*r.problems = append(*r.problems, Warning{Field: field, Reason: ReasonProfiles,
		Msg: field + ": " + fmt.Sprintf(format, args...) + " (Chef Automate refuses such a report)"})
}

// str reads a string field; null is "", anything else is a problem.
func (r *report) str(v []byte, field string) string {
	s, ok := jsonscan.Str(v)
	if !ok && jsonscan.Kind(v) != jsonscan.Null {
		r.problem(field, "expected a string, got %s", kindName(v))
	}
	return s
}

// array checks that v is an array or null.
func (r *report) array(v []byte, field string) bool {
	switch jsonscan.Kind(v) {
	case jsonscan.Array:
		return true
	case jsonscan.Null:
		return false
	}
	r.problem(field, "expected an array, got %s", kindName(v))
	return false
}

// object checks that v is an object; null is skipped silently only where
// Automate would take it as an absent value.
func (r *report) object(v []byte, field string) bool {
	if jsonscan.Kind(v) == jsonscan.Object {
		return true
	}
	r.problem(field, "expected an object, got %s", kindName(v))
	return false
}

// objects yields the objects of the array v, the value of field, each with
// its own field, once it has reported whatever else v or its elements are.
func (r *report) objects(v []byte, field string) iter.Seq2[string, []byte] {
	return func(yield func(string, []byte) bool) {
		if !r.array(v, field) {
			return
		}
		es := jsonscan.Elements(v)
		for es.Next() {
			f := field + "[" + strconv.Itoa(es.Index()) + "]"
			if r.object(es.Value(), f) && !yield(f, es.Value()) {
				return
			}
		}
	}
}

func (r *report) read(profiles []byte) {
	for field, pv := range r.objects(profiles, "profiles") {
		p := &profile{}
		it := jsonscan.Members(pv)
		for it.Next() {
			switch v := it.Value(); jsonscan.Key(it.Key()) {
			case "name":
				p.name = r.str(v, field+".name")
			case "status":
				p.status = r.str(v, field+".status")
			case "parent_profile":
				p.parent = r.str(v, field+".parent_profile")
			case "depends":
				p.depends = r.depends(v, field+".depends")
			case "controls":
				p.controls = r.controls(v, field+".controls")
			}
		}
		r.profiles = append(r.profiles, p)
	}
}

func (r *report) depends(v []byte, field string) []string {
	var out []string
	for f, d := range r.objects(v, field) {
		name, _ := jsonscan.Get(d, "name")
		out = append(out, r.str(name, f+".name"))
	}
	return out
}

func (r *report) controls(v []byte, field string) []*control {
	var out []*control
	for f, cv := range r.objects(v, field) {
		c := &control{}
		it := jsonscan.Members(cv)
		for it.Next() {
			switch v := it.Value(); jsonscan.Key(it.Key()) {
			case "id":
				c.id = r.str(v, f+".id")
			case "impact":
				c.impact = r.impact(v, f+".impact")
			case "results":
				c.results = nil
				if r.array(v, f+".results") {
					c.results = v
				}
			case "waiver_data":
				c.waived = r.waived(v, f+".waiver_data")
			}
		}
		out = append(out, c)
	}
	return out
}

// impact reads a number as the float32 Automate keeps.
func (r *report) impact(v []byte, field string) float32 {
	switch jsonscan.Kind(v) {
	case jsonscan.Null:
		return 0
	case jsonscan.Number:
		f, _ := strconv.ParseFloat(string(jsonscan.Trim(v)), 32)
		return float32(f)
	}
	r.problem(field, "expected a number, got %s", kindName(v))
	return 0
}

// waived reports whether waiver_data waives its control: it has any field
// set (a non-empty string, or true) and its message does not start with
// "Waiver expired" (an expired waiver leaves the control's own status).
func (r *report) waived(v []byte, field string) bool {
	if jsonscan.Kind(v) == jsonscan.Null || !r.object(v, field) {
		return false
	}
	set := false
	var msg string
	it := jsonscan.Members(v)
	for it.Next() {
		key := jsonscan.Key(it.Key())
		switch key {
		case "expiration_date", "justification", "message":
			s := r.str(it.Value(), field+"."+key)
			if key == "message" {
				msg = s
			}
			set = set || s != ""
		case "run", "skipped_due_to_waiver":
			switch jsonscan.Kind(it.Value()) {
			case jsonscan.True:
				set = true
			case jsonscan.False, jsonscan.Null:
			default:
				r.problem(field+"."+key, "expected a boolean, got %s", kindName(it.Value()))
			}
		}
	}
	return set && !strings.HasPrefix(msg, "Waiver expired")
}

// status is a control's own status from its results: failed if any result
// failed, else skipped if any was skipped, else passed.
func (c *control) status() string {
	st := CompliancePassed
	rs := jsonscan.Elements(c.results)
	for rs.Next() {
		s, _ := jsonscan.Get(rs.Value(), "status")
		switch str, _ := jsonscan.Str(s); str {
		case ComplianceFailed:
			return ComplianceFailed
		case ComplianceSkipped:
			st = ComplianceSkipped
		}
	}
	return st
}

func (p *profile) sums() ControlsSums {
	var s ControlsSums
	for _, c := range p.controls {
		s.Total++
		if c.waived {
			s.Waived.Total++
			continue
		}
		switch c.status() {
		case CompliancePassed:
			s.Passed.Total++
		case ComplianceSkipped:
			s.Skipped.Total++
		case ComplianceFailed:
			s.Failed.Total++
			switch {
			case c.impact < 0.4:
				s.Failed.Minor++
			case c.impact < 0.7:
				s.Failed.Major++
			default:
				s.Failed.Critical++
			}
		}
	}
	return s
}

// fixInherited drops the profiles that are another's dependency, merging
// results into their wrappers' controls, and returns those counted.
func (r *report) fixInherited() []*profile {
	deps := map[string]bool{}
	for _, p := range r.profiles {
		for _, d := range p.depends {
			deps[d] = true
		}
	}
	kept := make([]*profile, 0, len(r.profiles))
	for _, p := range r.profiles {
		if deps[p.name] || p.parent != "" {
			continue
		}
		if len(p.depends) > 0 {
			byID := make(map[string]*control, len(p.controls))
			for _, c := range p.controls {
				byID[c.id] = c
			}
			for _, src := range r.controlsFromDeps(false, p, 0, nil) {
				if dst := byID[src.id]; dst != nil && dst.results == nil {
					dst.results = src.results
				}
			}
		}
		kept = append(kept, p)
	}
	return kept
}

// controlsFromDeps lists the controls reached through p's dependencies, in
// Automate's order: for each dependency, every profile of that name or whose
// parent_profile is p, with its own controls and, recursively, theirs.
func (r *report) controlsFromDeps(own bool, p *profile, depth int, out []*control) []*control {
	// Each call and comparison costs a step, and each control listed one.
	if r.walked++; own {
		r.walked += len(p.controls)
	}
	if r.walked > maxDepWalk {
		r.cutShort("profile dependencies loop or fan out beyond %d steps", maxDepWalk)
		return out
	}
	if own {
		out = append(out, p.controls...)
	}
	if depth >= maxDepDepth {
		r.cutShort("profile dependencies nest deeper than %d (a loop?)", maxDepDepth)
		return out
	}
	for _, d := range p.depends {
		for _, q := range r.profiles {
			if r.walked++; r.walked > maxDepWalk {
				return out
			}
			if d == q.name || p.name == q.parent {
				out = r.controlsFromDeps(true, q, depth+1, out)
			}
		}
	}
	return out
}

// uuidRE is what Automate's UUID parser (gofrs/uuid FromString) takes: the
// canonical form, without dashes, in braces, or as a URN.
var uuidRE = regexp.MustCompile(`^(?i:[0-9a-f]{32}|(?:urn:uuid:)?` + canonicalUUID + `|\{` + canonicalUUID + `\})$`)

const canonicalUUID = `[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`

// reportWarnings are what Chef Automate refuses in a report besides its
// profiles: no node_uuid, or one that is not a UUID (400), and an end_time
// that is not RFC 3339 (500).
func reportWarnings(d *doc) []Warning {
	var out []Warning
	if id := d.str("node_uuid"); id == "" {
		out = append(out, Warning{Field: "node_uuid", Reason: ReasonNodeUUID,
			Msg: "missing node_uuid (Chef Automate refuses such a report)"})
	} else if !uuidRE.MatchString(id) {
		out = append(out, Warning{Field: "node_uuid", Reason: ReasonNodeUUID,
			Msg: fmt.Sprintf("node_uuid %q is not a UUID (Chef Automate refuses such a report)", id)})
	}
	if _, err := time.Parse(time.RFC3339, d.str("end_time")); err != nil {
		out = append(out, Warning{Field: "end_time", Reason: ReasonEndTime,
			Msg: fmt.Sprintf("end_time %q is not an RFC 3339 time (Chef Automate refuses such a report)", d.str("end_time"))})
	}
	return out
}
