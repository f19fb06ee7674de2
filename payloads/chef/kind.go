package chef

import (
	"fmt"

	"github.com/opsfirehose/firehose/payloads"
)

// Kind is the type of a data-collector message.
type Kind uint8

// The kinds, in Chef Automate's order of classification.
const (
	KindUnknown Kind = iota
	// KindRunStart is sent by chef-client when a run starts (message_type run_start).
	KindRunStart
	// KindRunConverge is sent when a run ends, successfully or not (message_type run_converge).
	KindRunConverge
	// KindAction is sent by Chef Infra Server when an object changes (message_type action).
	KindAction
	// KindLiveness is the liveness agent's ping (event_type node_ping, no message_type).
	KindLiveness
	// KindCompliance is an InSpec report (a top-level profiles key, no message_type).
	KindCompliance
)

// String is the name used in de-duplication ids and metrics: the
// message_type, event_type or report type that identifies the kind.
func (k Kind) String() string {
	switch k {
	case KindRunStart:
		return "run_start"
	case KindRunConverge:
		return "run_converge"
	case KindAction:
		return "action"
	case KindLiveness:
		return "node_ping"
	case KindCompliance:
		return "inspec_report"
	}
	return "unknown"
}

// Validation is how strictly messages are checked against the RFC's JSON
// schemas. In every mode a message must carry what its topic is built from
// (see Parse); the modes differ in what else they check and whether a
// problem refuses the message or only warns.
type Validation uint8

const (
	// ValidationCompatible (the zero value and the default) publishes every
	// message that has what its topic needs, and reports as warnings what
	// breaks the RFC's schemas widened by the deviations real chef-clients
	// and Chef Infra Server make (schemas/compatible), Chef's node-name rule,
	// and what Chef Automate would refuse in a compliance report.
	ValidationCompatible Validation = iota
	// ValidationStrict is the RFC to the letter (schemas/strict) and Chef's
	// node-name rule, and refuses what breaks them. Real payloads fail it:
	// Chef Infra Server actions, resources outside a cookbook, Habitat
	// entity ids, InSpec reports from nodes whose names have spaces.
	ValidationStrict
	// ValidationOff checks only what topics need, and warns of nothing.
	ValidationOff
)

// String returns "compatible", "strict" or "off".
func (v Validation) String() string {
	switch v {
	case ValidationCompatible:
		return "compatible"
	case ValidationStrict:
		return "strict"
	case ValidationOff:
		return "off"
	}
	return fmt.Sprintf("Validation(%d)", uint8(v))
}

// MarshalText writes the mode as the config file spells it.
func (v Validation) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText reads "compatible", "strict" or "off" (config: validation).
func (v *Validation) UnmarshalText(text []byte) error {
	switch string(text) {
	case "compatible", "":
		*v = ValidationCompatible
	case "strict":
		*v = ValidationStrict
	case "off":
		*v = ValidationOff
	default:
		return fmt.Errorf("%q is not a validation mode; use compatible, strict or off", text)
	}
	return nil
}

// ErrUnknownType is returned for a valid JSON object that is none of the
// kinds: its message is exactly Chef Automate's.
var ErrUnknownType = &payloads.FieldError{Msg: "unknown message type"}

// fieldError is a problem with a message that stops it being published, for
// an HTTP 400 answer {"error": Msg, "field": Field}. field is the JSON path of
// the value at fault ("node_name", "resources[3].status"), empty when the
// problem is the whole body.
func fieldError(field, format string, args ...any) *payloads.FieldError {
	return &payloads.FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Warning is a problem with a message that is published all the same: the
// bus is not a validator. Field is the JSON path of the value at fault, as
// in Error; Reason is one of the Reason constants, a fixed word fit for a
// metric label; Msg says what is wrong.
type Warning struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
	Msg    string `json:"warning"`
}

// Reasons of warnings. The set is closed, so that a metric labelled by
// reason has a bounded number of series.
const (
	// ReasonNodeName: node_name breaks Chef's rule NodeNamePattern (InSpec
	// run outside Chef, for one, is not bound by it). It is escaped into
	// its topic level like any other value.
	ReasonNodeName = "node_name_rule"
	// ReasonRequired: a field the schema requires is missing.
	ReasonRequired = "schema_required"
	// ReasonType: a value has a type the schema does not allow.
	ReasonType = "schema_type"
	// ReasonEnum: a value is not one the schema lists.
	ReasonEnum = "schema_enum"
	// ReasonPattern: a string does not match the schema's pattern (an id
	// that is not a UUID, a timestamp not in the RFC's form).
	ReasonPattern = "schema_pattern"
	// ReasonSchema: any other schema rule (a negative count, ...).
	ReasonSchema = "schema_other"
	// ReasonOrganization: organization_name is neither a string nor null in
	// a message that has no schema; it is published under "_".
	ReasonOrganization = "organization_name"
	// ReasonNodeUUID: a compliance report's node_uuid is missing or not a
	// UUID, for which Chef Automate refuses the report.
	ReasonNodeUUID = "node_uuid"
	// ReasonEndTime: a compliance report's end_time is not an RFC 3339
	// time, for which Chef Automate refuses the report.
	ReasonEndTime = "end_time"
	// ReasonProfiles: a compliance report's profiles (or a profile, control
	// or result in them) do not have the shape InSpec writes, for which
	// Chef Automate refuses the report; the verdict reads what it can.
	ReasonProfiles = "profiles"
)

// Reasons lists every Reason constant, for metrics that want to show a zero
// for each; the slice is the caller's.
func Reasons() []string {
	return []string{ReasonNodeName, ReasonRequired, ReasonType, ReasonEnum, ReasonPattern, ReasonSchema,
		ReasonOrganization, ReasonNodeUUID, ReasonEndTime, ReasonProfiles}
}
