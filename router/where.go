package router

import (
	"encoding/json"
	"math"
)

// condition is one `where` entry: a top-level payload field and the values
// it may take.
type condition struct {
	field  string
	values []any // strings, float64s, bools or nil
}

func newConditions(where map[string]any) []condition {
	var conds []condition
	for field, v := range where {
		c := condition{field: field}
		if list, ok := v.([]any); ok {
			for _, e := range list {
				c.values = append(c.values, normalise(e))
			}
		} else {
			c.values = []any{normalise(v)}
		}
		conds = append(conds, c)
	}
	return conds
}

// normalise turns config numbers into float64, as encoding/json decodes them.
func normalise(v any) any {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int64:
		return float64(n)
	case uint64:
		return float64(n)
	}
	return v
}

// payloadFields is the top level of a JSON payload, decoded once per message
// and only when some route has a `where`.
type payloadFields struct {
	decoded bool
	fields  map[string]json.RawMessage
}

func (p *payloadFields) get(payload []byte, field string) (any, bool) {
	if !p.decoded {
		p.decoded = true
		_ = json.Unmarshal(payload, &p.fields) // not an object: no field matches
	}
	raw, ok := p.fields[field]
	if !ok {
		return nil, false
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil, false
	}
	return v, true
}

// matches reports whether every condition holds for the payload.
func matches(conds []condition, payload []byte, fields *payloadFields) bool {
	for _, c := range conds {
		v, ok := fields.get(payload, c.field)
		if !ok {
			return false
		}
		found := false
		for _, want := range c.values {
			if equal(v, want) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func equal(got, want any) bool {
	if g, ok := got.(float64); ok {
		w, ok := want.(float64)
		return ok && (g == w || math.IsNaN(g) && math.IsNaN(w))
	}
	return got == want
}
