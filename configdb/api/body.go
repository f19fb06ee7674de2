package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/opsfirehose/firehose/configdb"
)

// jsonObject is a request body whose fields are read one by one, so that a
// wrong type is a 400 naming the field. Unknown fields are ignored, as
// tuning-box did.
type jsonObject map[string]json.RawMessage

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// str reads a string field; present is false when it is absent.
func (o jsonObject) str(field string, required bool) (s string, present bool, err error) {
	raw, ok := o[field]
	if !ok {
		if required {
			return "", false, invalid(field, "%s is required", field)
		}
		return "", false, nil
	}
	if err := json.Unmarshal(raw, &s); err != nil || isNull(raw) {
		return "", false, invalid(field, "%s must be a string", field)
	}
	return s, true, nil
}

// id reads a positive integer field, or null when nullable.
func (o jsonObject) id(field string, nullable bool) (v *int64, present bool, err error) {
	raw, ok := o[field]
	if !ok {
		return nil, false, nil
	}
	if isNull(raw) {
		if nullable {
			return nil, true, nil
		}
		return nil, false, invalid(field, "%s must be an integer, not null", field)
	}
	n, err := parseJSONID(raw)
	if err != nil {
		return nil, false, invalid(field, "%s must be a positive integer", field)
	}
	return &n, true, nil
}

func parseJSONID(raw json.RawMessage) (int64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] < '0' || raw[0] > '9' {
		// json.Number would also take the string "7".
		return 0, fmt.Errorf("not a positive integer: %s", raw)
	}
	var num json.Number
	if err := json.Unmarshal(raw, &num); err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(num.String(), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("not a positive integer: %s", raw)
	}
	return n, nil
}

// list reads an array field.
func (o jsonObject) list(field string, required bool) (items []json.RawMessage, present bool, err error) {
	raw, ok := o[field]
	if !ok {
		if required {
			return nil, false, invalid(field, "%s is required", field)
		}
		return nil, false, nil
	}
	if err := json.Unmarshal(raw, &items); err != nil || isNull(raw) {
		return nil, false, invalid(field, "%s must be an array", field)
	}
	return items, true, nil
}

// refs reads an array of components given by id or name.
func (o jsonObject) refs(field string, required bool) ([]configdb.Ref, bool, error) {
	items, present, err := o.list(field, required)
	if err != nil || !present {
		return nil, present, err
	}
	refs := make([]configdb.Ref, 0, len(items))
	for i, raw := range items {
		var name string
		if json.Unmarshal(raw, &name) == nil && !isNull(raw) {
			if n, err := strconv.ParseInt(name, 10, 64); err == nil && n > 0 {
				refs = append(refs, configdb.Ref{ID: n})
			} else {
				refs = append(refs, configdb.Ref{Name: name})
			}
			continue
		}
		id, err := parseJSONID(raw)
		if err != nil {
			return nil, false, invalid(fmt.Sprintf("%s[%d]", field, i), "%s[%d] must be a component id or name", field, i)
		}
		refs = append(refs, configdb.Ref{ID: id})
	}
	return refs, true, nil
}

// strings reads an array of strings.
func (o jsonObject) strings(field string, required bool) ([]string, bool, error) {
	items, present, err := o.list(field, required)
	if err != nil || !present {
		return nil, present, err
	}
	out := make([]string, len(items))
	for i, raw := range items {
		if err := json.Unmarshal(raw, &out[i]); err != nil || isNull(raw) {
			return nil, false, invalid(fmt.Sprintf("%s[%d]", field, i), "%s[%d] must be a string", field, i)
		}
	}
	return out, true, nil
}

// objects reads an array of objects.
func (o jsonObject) objects(field string) ([]jsonObject, bool, error) {
	items, present, err := o.list(field, false)
	if err != nil || !present {
		return nil, present, err
	}
	out := make([]jsonObject, len(items))
	for i, raw := range items {
		if err := json.Unmarshal(raw, &out[i]); err != nil || out[i] == nil {
			return nil, false, invalid(fmt.Sprintf("%s[%d]", field, i), "%s[%d] must be an object", field, i)
		}
	}
	return out, true, nil
}
