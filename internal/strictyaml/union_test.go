package strictyaml

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

type circle struct {
	Radius int `yaml:"radius"`
}

func (c *circle) SetDefaults() { c.Radius = 1 }

func (c *circle) Validate() error {
	if c.Radius <= 0 {
		return &KeyError{Key: "radius", Err: fmt.Errorf("must be positive")}
	}
	return nil
}

type square struct {
	Side int `yaml:"side"`
}

type shape struct {
	kind   string
	circle *circle
	square *square
}

func (s *shape) UnionKey() string { return "kind" }

func (s *shape) Choose(kind string) (any, error) {
	*s = shape{kind: kind}
	switch kind {
	case "circle":
		s.circle = &circle{}
		s.circle.SetDefaults()
		return s.circle, nil
	case "square":
		s.square = &square{}
		return s.square, nil
	}
	return nil, fmt.Errorf("%q is not a shape; use circle or square", kind)
}

func (s *shape) Chosen() any {
	if s.circle != nil {
		return s.circle
	}
	if s.square != nil {
		return s.square
	}
	return nil
}

func (s *shape) Validate() error {
	if s.Chosen() == nil {
		return &KeyError{Key: "kind", Err: fmt.Errorf("required")}
	}
	return nil
}

// TestUnionChoosesByKey: the key's value chooses the type the other keys
// decode into, with its defaults; keys of another choice are unknown;
// the chosen value is validated in the union's place; a bad choice is
// reported at the key once.
func TestUnionChoosesByKey(t *testing.T) {
	type doc struct {
		Shapes map[string]shape `yaml:"shapes"`
	}
	var merged struct {
		Base   any              `yaml:"base"`
		Shapes map[string]shape `yaml:"shapes"`
	}
	err := Decode([]byte(`
base: &b {kind: "${KIND:-circle}"}
shapes:
  d: {<<: *b, radius: 3}
`), &merged, Options{LookupEnv: func(string) (string, bool) { return "", false }})
	assert.NoError(t, err)
	if assert.NotNil(t, merged.Shapes["d"].circle, "a kind from a merge key and ${VAR:-default}") {
		assert.Equal(t, 3, merged.Shapes["d"].circle.Radius)
	}

	var got struct {
		Shapes map[string]shape `yaml:"shapes"`
	}
	assert.NoError(t, Decode([]byte("shapes:\n  c: {kind: circle}\n  s: {kind: square, side: 2}\n"), &got, Options{}))
	assert.Equal(t, 1, got.Shapes["c"].circle.Radius)
	assert.Equal(t, 2, got.Shapes["s"].square.Side)

	for _, tt := range []struct{ doc, want string }{
		{"shapes:\n  c: {kind: circle, side: 2}\n", `shapes.c.side: unknown key`},
		{"shapes:\n  c: {kind: circle, radius: 0}\n", `shapes.c.radius: must be positive`},
		{"shapes:\n  c: {kind: hexagon, radius: 1}\n", `shapes.c.kind: "hexagon" is not a shape; use circle or square`},
		{"shapes:\n  c: {radius: 1}\n", `shapes.c.kind: "" is not a shape; use circle or square`},
		{"shapes:\n  c: {kind: [circle]}\n", `shapes.c.kind: expected a string, got a sequence`},
		{"shapes:\n  c:\n", `shapes.c.kind: required`},
	} {
		var d doc
		msgs := messages(t, Decode([]byte(tt.doc), &d, Options{}))
		if assert.Len(t, msgs, 1, tt.doc) {
			assert.Contains(t, msgs[0], tt.want, tt.doc)
		}
	}
}
