package chef

import (
	"strings"

	"github.com/opsfirehose/firehose/payloads/chef/rawjson"
)

// Compliance statuses, the last level of a compliance topic.
const (
	CompliancePassed  = "passed"
	ComplianceFailed  = "failed"
	ComplianceSkipped = "skipped"
)

// ComplianceStatus computes a report's overall status from the raw profiles
// array, as Chef Automate does:
//
//   - a control has failed if any of its results failed, else it is skipped
//     if any result was skipped, else it has passed (no results: passed);
//   - a waived control (non-empty waiver_data whose message does not start
//     with "Waiver expired") counts as skipped whatever its results: it was
//     deliberately not assessed;
//   - the report has failed if any control failed, is skipped if it has
//     controls and every one is skipped, and has passed otherwise (an empty
//     report has passed).
//
// Anything that is not the expected shape (a profile that is not an object,
// controls that are not an array, ...) is ignored.
func ComplianceStatus(profiles []byte) string {
	var total, skipped int
	ps := rawjson.Elements(profiles)
	for ps.Next() {
		controls, _ := rawjson.Get(ps.Value(), "controls")
		cs := rawjson.Elements(controls)
		for cs.Next() {
			total++
			switch controlStatus(cs.Value()) {
			case ComplianceFailed:
				return ComplianceFailed
			case ComplianceSkipped:
				skipped++
			}
		}
	}
	if total > 0 && skipped == total {
		return ComplianceSkipped
	}
	return CompliancePassed
}

func controlStatus(control []byte) string {
	if rawjson.Kind(control) != rawjson.Object {
		return ""
	}
	if waived(control) {
		return ComplianceSkipped
	}
	status := CompliancePassed
	results, _ := rawjson.Get(control, "results")
	rs := rawjson.Elements(results)
	for rs.Next() {
		s, _ := rawjson.Get(rs.Value(), "status")
		switch str, _ := rawjson.Str(s); str {
		case ComplianceFailed:
			return ComplianceFailed
		case ComplianceSkipped:
			status = ComplianceSkipped
		}
	}
	return status
}

func waived(control []byte) bool {
	data, ok := rawjson.Get(control, "waiver_data")
	if !ok || rawjson.Kind(data) != rawjson.Object {
		return false
	}
	it := rawjson.Members(data)
	if !it.Next() {
		return false // {} is "not waived"
	}
	msg, _ := rawjson.Get(data, "message")
	s, _ := rawjson.Str(msg)
	return !strings.HasPrefix(s, "Waiver expired")
}
