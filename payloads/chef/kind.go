package chef

import (
	"fmt"
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
// schemas. Whatever the mode, a message must carry the fields its topic is
// built from, and node_name must follow Chef's rule.
type Validation uint8

const (
	// ValidationCompatible (the zero value and the default) accepts what real
	// chef-client runs and Chef Infra Server send: the RFC schemas widened by
	// every deviation listed in the fixtures README (schemas/compatible).
	ValidationCompatible Validation = iota
	// ValidationStrict is the RFC to the letter (schemas/strict). Real
	// payloads fail it: Chef Infra Server actions, resources outside a
	// cookbook, Habitat entity ids.
	ValidationStrict
	// ValidationOff checks only what topics need.
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

// Error is a problem with a message, for an HTTP 400 answer
// {"error": Msg, "field": Field}. Field is the JSON path of the value at
// fault ("node_name", "resources[3].status"), empty when the problem is the
// whole body.
type Error struct {
	Field string
	Msg   string
}

func (e *Error) Error() string { return e.Msg }

// ErrUnknownType is returned for a valid JSON object that is none of the
// kinds: its message is exactly Chef Automate's.
var ErrUnknownType = &Error{Msg: "unknown message type"}

func fieldError(field, format string, args ...any) *Error {
	return &Error{Field: field, Msg: fmt.Sprintf(format, args...)}
}
