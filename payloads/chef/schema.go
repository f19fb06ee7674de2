package chef

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/opsfirehose/firehose/internal/jsonscan"
)

// The RFC's draft-04 schemas: strict/ is the RFC verbatim, compatible/ the
// same widened by the deviations real senders make (see README.md).
//
//go:embed schemas/strict/*.json schemas/compatible/*.json
var schemaFiles embed.FS

// schema is one compiled schema and the shape the instance walk follows.
type schema struct {
	compiled *jsonschema.Schema
	shape    *shape
	// printer words the validator's messages.
	printer *message.Printer
}

// schemaKinds are the kinds the RFC has a schema for.
var schemaKinds = []Kind{KindRunStart, KindRunConverge, KindAction}

// compileSchemas compiles the schemas of one mode, or returns nil for
// ValidationOff.
func compileSchemas(mode Validation) (map[Kind]*schema, error) {
	var dir string
	switch mode {
	case ValidationOff:
		return nil, nil
	case ValidationStrict:
		dir = "strict"
	case ValidationCompatible:
		dir = "compatible"
	default:
		return nil, fmt.Errorf("unknown validation mode %d", mode)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	c.AssertFormat()
	c.RegisterFormat(&jsonschema.Format{Name: "node-name", Validate: func(v any) error {
		if s, ok := v.(string); ok && !ValidNodeName(s) {
			return errors.New("does not match " + NodeNamePattern)
		}
		return nil
	}})
	printer := message.NewPrinter(language.English)
	out := make(map[Kind]*schema, len(schemaKinds))
	for _, k := range schemaKinds {
		name := "schemas/" + dir + "/" + k.String() + ".json"
		data, err := schemaFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		url := "embed:///" + name
		if err := c.AddResource(url, doc); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		compiled, err := c.Compile(url)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		m, _ := doc.(map[string]any)
		out[k] = &schema{compiled: compiled, shape: shapeOf(m), printer: printer}
	}
	return out, nil
}

// shape is what a schema constrains of a value, so that validating a
// converge message does not mean decoding its node object: a container whose
// schema constrains only its JSON type ("node": {"type": "object"}) is
// validated as an empty container of the same kind, which the schema judges
// exactly as it judges the real one. Scalars are always decoded.
type shape struct {
	// opaque: nothing but the JSON type is constrained (or nothing at all).
	opaque bool
	// full: a keyword the walk does not model constrains the container;
	// decode all of it.
	full  bool
	enum  bool
	props map[string]*shape
	items *shape
}

// Keywords the walk models. Anything else makes a container "full".
var (
	typeOnlyKeywords = []string{"$schema", "description", "title", "type"}
	walkKeywords     = []string{"properties", "items", "required", "pattern", "format", "enum", "minimum", "maximum"}
)

func shapeOf(s map[string]any) *shape {
	if s == nil {
		return nil
	}
	sh := &shape{opaque: true}
	for k, v := range s {
		switch {
		case slices.Contains(typeOnlyKeywords, k):
			continue
		case slices.Contains(walkKeywords, k):
			sh.opaque = false
		default:
			sh.opaque, sh.full = false, true
		}
		switch k {
		case "enum":
			sh.enum = true
		case "properties":
			props, ok := v.(map[string]any)
			if !ok {
				sh.full = true
				continue
			}
			sh.props = make(map[string]*shape, len(props))
			for name, p := range props {
				ps, _ := p.(map[string]any)
				sh.props[name] = shapeOf(ps)
			}
		case "items":
			items, ok := v.(map[string]any)
			if !ok { // a tuple of schemas
				sh.full = true
				continue
			}
			sh.items = shapeOf(items)
		}
	}
	return sh
}

// prop is the shape of the property name, nil when unconstrained.
func (sh *shape) prop(name string) *shape {
	if sh == nil || sh.props == nil {
		return nil
	}
	return sh.props[name]
}

// elementsInstance is instance for an array read by document, from the
// members already read: nothing is scanned again.
func elementsInstance(es *elements, sh *shape) (any, error) {
	if sh == nil || sh.opaque || sh.full || sh.enum {
		return instance(es.raw, sh)
	}
	a := make([]any, 0, len(es.items))
	for _, e := range es.items {
		if e.members == nil || sh.items == nil || sh.items.opaque || sh.items.full || sh.items.enum {
			v, err := instance(e.Raw, sh.items)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
			continue
		}
		m := make(map[string]any, len(e.members))
		for _, mem := range e.members {
			v, err := instance(mem.Value, sh.items.prop(mem.Key))
			if err != nil {
				return nil, err
			}
			m[mem.Key] = v
		}
		a = append(a, m)
	}
	return a, nil
}

// instance builds the value the validator sees for the raw JSON v, which is
// valid. Containers the shape does not look into are empty stand-ins.
func instance(v []byte, sh *shape) (any, error) {
	switch jsonscan.Kind(v) {
	case jsonscan.Object:
		if sh == nil || sh.opaque {
			return map[string]any{}, nil
		}
		if sh.full || sh.enum {
			return decodeAll(v)
		}
		m := make(map[string]any)
		it := jsonscan.Members(v)
		for it.Next() {
			key := jsonscan.Key(it.Key())
			var child *shape
			if sh.props != nil {
				child = sh.props[key]
			}
			val, err := instance(it.Value(), child)
			if err != nil {
				return nil, err
			}
			m[key] = val
		}
		return m, it.Err()
	case jsonscan.Array:
		if sh == nil || sh.opaque {
			return []any{}, nil
		}
		if sh.full || sh.enum {
			return decodeAll(v)
		}
		a := []any{}
		it := jsonscan.Elements(v)
		for it.Next() {
			val, err := instance(it.Value(), sh.items)
			if err != nil {
				return nil, err
			}
			a = append(a, val)
		}
		return a, it.Err()
	case jsonscan.String:
		if sh == nil || sh.opaque {
			// Only the type is checked: any string will do, and "" costs nothing.
			return "", nil
		}
		s, ok := jsonscan.Str(v)
		if !ok {
			return nil, errors.New("invalid string")
		}
		return s, nil
	case jsonscan.Number:
		return json.Number(jsonscan.Trim(v)), nil
	case jsonscan.True:
		return true, nil
	case jsonscan.False:
		return false, nil
	case jsonscan.Null:
		return nil, nil
	}
	return nil, errors.New("invalid JSON value")
}

func decodeAll(v []byte) (any, error) {
	return jsonschema.UnmarshalJSON(bytes.NewReader(v))
}

// validate checks the top-level members against s and returns every
// problem, sorted by field path; nil when the message is valid. With
// nullOrg, a missing organization_name is validated as null.
func (s *schema) validate(d *doc, nullOrg bool) []problem {
	top := make(map[string]any, len(d.members)+1)
	if nullOrg {
		top["organization_name"] = nil
	}
	for _, m := range d.members {
		child := s.shape.prop(m.Key)
		var v any
		var err error
		if m.Key == "resources" && d.resources != nil && d.resources.offset == m.Offset {
			v, err = elementsInstance(d.resources, child)
		} else {
			v, err = instance(m.Value, child)
		}
		if err != nil {
			return []problem{{Warning{Field: m.Key, Reason: ReasonSchema,
				Msg: fmt.Sprintf("invalid JSON in %s: %v", m.Key, err)}}}
		}
		top[m.Key] = v
	}
	err := s.compiled.Validate(top)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return []problem{{Warning{Reason: ReasonSchema, Msg: "schema validation: " + err.Error()}}}
	}
	return schemaProblems(verr, top, s.printer)
}

// schemaProblems turns the validator's tree of errors into its leaves,
// sorted by field path then message, so that answers are deterministic.
func schemaProblems(root *jsonschema.ValidationError, inst any, printer *message.Printer) []problem {
	var leaves []problem
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		field := fieldPath(e.InstanceLocation, inst)
		if req, ok := e.ErrorKind.(*kind.Required); ok && len(req.Missing) > 0 {
			for _, name := range slices.Sorted(slices.Values(req.Missing)) {
				f := joinField(field, name)
				leaves = append(leaves, problem{Warning{Field: f, Reason: ReasonRequired,
					Msg: fmt.Sprintf("missing %s (required by the schema)", f)}})
			}
			return
		}
		msg := e.ErrorKind.LocalizedString(printer)
		w := Warning{Field: field, Reason: reasonOf(e.ErrorKind), Msg: "schema: " + msg}
		if field != "" {
			w.Msg = field + ": " + msg
		}
		leaves = append(leaves, problem{w})
	}
	walk(root)
	if len(leaves) == 0 {
		return []problem{{Warning{Reason: ReasonSchema, Msg: "invalid against the schema"}}}
	}
	slices.SortFunc(leaves, func(a, b problem) int {
		if c := strings.Compare(a.Field, b.Field); c != 0 {
			return c
		}
		return strings.Compare(a.Msg, b.Msg)
	})
	return leaves
}

// reasonOf names the schema keyword a leaf broke. The schemas' only format
// is Chef's node name.
func reasonOf(k jsonschema.ErrorKind) string {
	switch k.(type) {
	case *kind.Type:
		return ReasonType
	case *kind.Enum:
		return ReasonEnum
	case *kind.Pattern:
		return ReasonPattern
	case *kind.Format:
		return ReasonNodeName
	}
	return ReasonSchema
}

// fieldPath writes an instance location as "resources[3].status", telling
// array indexes from keys by walking the instance.
func fieldPath(loc []string, inst any) string {
	var b strings.Builder
	cur := inst
	for _, tok := range loc {
		switch v := cur.(type) {
		case []any:
			b.WriteString("[" + tok + "]")
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(v) {
				cur = v[i]
			} else {
				cur = nil
			}
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(tok)
			if m, ok := v.(map[string]any); ok {
				cur = m[tok]
			} else {
				cur = nil
			}
		}
	}
	return b.String()
}

func joinField(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}
