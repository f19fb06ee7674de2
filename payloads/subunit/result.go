package subunit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/opsfirehose/firehose/payloads"
)

// The statuses a subunit worker publishes.
const (
	ResultSuccess = "success"
	ResultFailure = "failure"
)

// Field names of a result, in its JSON body and as query parameters.
const (
	FieldWorker    = "worker"
	FieldProject   = "project"
	FieldChange    = "change"
	FieldStatus    = "status"
	FieldBuildUUID = "build_uuid"
	FieldSourceURL = "source_url"
)

// ErrInvalid is wrapped by every *payloads.FieldError of this package.
var ErrInvalid = errors.New("invalid subunit result")

// Result is what a subunit worker reports about one build: where it ran,
// for which change, and whether its tests passed.
type Result struct {
	// Worker is the host that processed the subunit stream.
	Worker string
	// Namespace and Repo are the two halves of the project,
	// "openstack/nova": Namespace is up to the first '/'.
	Namespace, Repo string
	// Change is the Gerrit change number, in decimal.
	Change    string
	Status    string
	BuildUUID string
	SourceURL string
}

// maxChangeDigits keeps a change number an ordinary number.
const maxChangeDigits = 20

// ParseResult reads the JSON a worker posts:
//
//	{"worker": "subunit-worker01", "project": "openstack/nova", "change": 12345,
//	 "status": "success", "build_uuid": "45f7...", "source_url": "https://..."}
//
// change may be a number or a string of digits. Other fields are ignored.
func ParseResult(body []byte) (Result, error) {
	var in struct {
		Worker    *string         `json:"worker"`
		Project   *string         `json:"project"`
		Change    json.RawMessage `json:"change"`
		Status    *string         `json:"status"`
		BuildUUID *string         `json:"build_uuid"`
		SourceURL *string         `json:"source_url"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			if typeErr.Field == "" {
				return Result{}, &payloads.FieldError{Err: ErrInvalid, Msg: "the body must be a JSON object, not " + typeErr.Value}
			}
			return Result{}, &payloads.FieldError{Err: ErrInvalid, Field: typeErr.Field, Msg: "must be a string, not " + typeErr.Value}
		}
		return Result{}, &payloads.FieldError{Err: ErrInvalid, Msg: "invalid JSON: " + err.Error() +
			" (to send a subunit v2 stream, set Content-Type: application/x-subunit)"}
	}
	change, err := changeNumber(in.Change)
	if err != nil {
		return Result{}, err
	}
	status := deref(in.Status)
	if status != ResultSuccess && status != ResultFailure {
		return Result{}, &payloads.FieldError{Err: ErrInvalid, Field: FieldStatus, Msg: fmt.Sprintf("is %q; must be %q or %q", status, ResultSuccess, ResultFailure)}
	}
	r, err := build(deref(in.Worker), deref(in.Project), change, deref(in.BuildUUID), deref(in.SourceURL))
	if err != nil {
		return Result{}, err
	}
	r.Status = status
	return r, nil
}

// ResultFromQuery reads the worker, project, change, build_uuid and
// source_url query parameters that come with a subunit v2 stream. Status is
// left for the stream to decide.
func ResultFromQuery(q url.Values) (Result, error) {
	change := q.Get(FieldChange)
	if change == "" {
		return Result{}, &payloads.FieldError{Err: ErrInvalid, Field: FieldChange, Msg: "missing: the Gerrit change number, such as change=12345"}
	}
	if !isDigits(change) {
		return Result{}, &payloads.FieldError{Err: ErrInvalid, Field: FieldChange, Msg: fmt.Sprintf("%q is not a change number", change)}
	}
	return build(q.Get(FieldWorker), q.Get(FieldProject), change, q.Get(FieldBuildUUID), q.Get(FieldSourceURL))
}

func build(worker, project, change, buildUUID, sourceURL string) (Result, error) {
	missing := func(field, example string) (Result, error) {
		return Result{}, &payloads.FieldError{Err: ErrInvalid, Field: field, Msg: "missing: " + example}
	}
	switch {
	case worker == "":
		return missing(FieldWorker, "the host that processed the subunit stream, such as \"subunit-worker01\"")
	case project == "":
		return missing(FieldProject, "the git repository, such as \"openstack/nova\"")
	case buildUUID == "":
		return missing(FieldBuildUUID, "the build's UUID")
	case sourceURL == "":
		return missing(FieldSourceURL, "the URL of the subunit file")
	}
	ns, repo, ok := strings.Cut(project, "/")
	if !ok || ns == "" || repo == "" {
		return Result{}, &payloads.FieldError{Err: ErrInvalid, Field: FieldProject, Msg: fmt.Sprintf("%q is not <git namespace>/<repo>, such as \"openstack/nova\"", project)}
	}
	return Result{Worker: worker, Namespace: ns, Repo: repo, Change: change, BuildUUID: buildUUID, SourceURL: sourceURL}, nil
}

func changeNumber(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", &payloads.FieldError{Err: ErrInvalid, Field: FieldChange, Msg: "missing: the Gerrit change number, such as 12345"}
	}
	s := string(raw)
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", &payloads.FieldError{Err: ErrInvalid, Field: FieldChange, Msg: err.Error()}
		}
	}
	if !isDigits(s) {
		return "", &payloads.FieldError{Err: ErrInvalid, Field: FieldChange, Msg: fmt.Sprintf("%s is not a change number", raw)}
	}
	return s, nil
}

func isDigits(s string) bool {
	if s == "" || len(s) > maxChangeDigits {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Payload is the JSON a subunit worker publishes: the firehose schema's
// three fields, in its order.
func (r Result) Payload() []byte {
	b, _ := json.Marshal(struct {
		Status    string `json:"status"`
		BuildUUID string `json:"build_uuid"`
		SourceURL string `json:"source_url"`
	}{r.Status, r.BuildUUID, r.SourceURL})
	return b
}
