package subunit

import (
	"encoding/json"
	"errors"
	"net/url"
	"testing"

	"github.com/opsfirehose/firehose/payloads"
)

func TestResultFromQuery(t *testing.T) {
	q := url.Values{"worker": {"w1"}, "project": {"openstack/nova"}, "change": {"12345"}, "build_uuid": {"u"}, "source_url": {"s"}}
	r, err := ResultFromQuery(q)
	if err != nil || r.Worker != "w1" || r.Namespace != "openstack" || r.Repo != "nova" || r.Change != "12345" || r.Status != "" {
		t.Fatalf("%+v %v", r, err)
	}
	for field, bad := range map[string]string{"change": "12a", "project": "nova", "worker": "", "build_uuid": "", "source_url": ""} {
		q2 := url.Values{}
		for k, v := range q {
			q2[k] = v
		}
		q2.Set(field, bad)
		var fe *payloads.FieldError
		if _, err := ResultFromQuery(q2); !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%s=%q: %v", field, bad, err)
		}
	}
	// A repo may itself have levels; the namespace is up to the first '/'.
	q.Set("project", "x/openstack/nova")
	if r, _ := ResultFromQuery(q); r.Namespace != "x" || r.Repo != "openstack/nova" {
		t.Errorf("%+v", r)
	}
}

// FuzzParseResult checks that ParseResult never panics and that what it
// accepts makes a topic and the schema's payload.
func FuzzParseResult(f *testing.F) {
	f.Add([]byte(`{"worker":"w","project":"a/b","change":1,"status":"success","build_uuid":"u","source_url":"s"}`))
	f.Add([]byte(`{"worker":"w","project":"a/b/c","change":"007","status":"failure","build_uuid":"u","source_url":"s","x":[1]}`))
	f.Add([]byte(`{"change":1e3}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseResult(body)
		if err != nil {
			var fe *payloads.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		if r.Worker == "" || r.Namespace == "" || r.Repo == "" || !isDigits(r.Change) || r.BuildUUID == "" || r.SourceURL == "" ||
			(r.Status != ResultSuccess && r.Status != ResultFailure) {
			t.Fatalf("accepted %+v", r)
		}
		var p map[string]string
		if err := json.Unmarshal(r.Payload(), &p); err != nil || len(p) != 3 || p["status"] != r.Status {
			t.Fatalf("payload %s: %v", r.Payload(), err)
		}
	})
}
