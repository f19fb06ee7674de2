package strictyaml

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidateReroots(t *testing.T) {
	doc := `broker:
  listeners:
    - name: plain
    - name: secure
      tls: {key_file: k.pem}
`
	c := defaultConfig()
	err := Decode([]byte(doc), &c, Options{})
	kes := keyErrors(t, err)
	require.Len(t, kes, 1)
	assert.Equal(t, "broker.listeners[1].tls.cert_file", kes[0].Key)
	assert.Equal(t, "broker.listeners[1].tls.cert_file: must be set when tls is given", kes[0].Error())
	assert.Equal(t, "must be set when tls is given", kes[0].Err.Error())
}

func TestValidatePlainErrorIsAtTheStruct(t *testing.T) {
	c := defaultConfig()
	err := Decode([]byte("broker:\n  listeners:\n    - name: bad\n"), &c, Options{})
	assert.Equal(t, []string{`broker.listeners[0]: listener "bad" is not allowed`}, messages(t, err))
}

func TestValidateRunsOnEmptyDocument(t *testing.T) {
	c := defaultConfig()
	c.Broker.Listeners = []listener{{Name: "bad"}}
	err := Decode(nil, &c, Options{})
	assert.Equal(t, []string{`broker.listeners[0]: listener "bad" is not allowed`}, messages(t, err))
}

// Validation types: every level records its calls, to check the order.

type vLeaf struct {
	N   int `yaml:"n"`
	log *[]string
}

func (l *vLeaf) Validate() error {
	if l.log != nil {
		*l.log = append(*l.log, fmt.Sprintf("leaf %d", l.N))
	}
	if l.N < 0 {
		return fmt.Errorf("n must not be negative, got %d", l.N)
	}
	return nil
}

type vMid struct {
	Leaves []vLeaf          `yaml:"leaves"`
	ByName map[string]vLeaf `yaml:"by_name"`
	Ptr    *vLeaf           `yaml:"ptr"`
	log    *[]string
}

func (m *vMid) Validate() error {
	if m.log != nil {
		*m.log = append(*m.log, "mid")
	}
	var p Problems
	if len(m.Leaves) > 2 {
		p.Add("leaves", "at most 2 leaves, got %d", len(m.Leaves))
	}
	return p.Err()
}

type vRoot struct {
	Mid vMid `yaml:"mid"`
	log *[]string
}

func (r *vRoot) Validate() error {
	if r.log != nil {
		*r.log = append(*r.log, "root")
	}
	return nil
}

func TestValidateOrderChildrenFirst(t *testing.T) {
	var log []string
	r := vRoot{log: &log, Mid: vMid{log: &log, Leaves: []vLeaf{{N: 1, log: &log}, {N: 2, log: &log}}}}
	// No document: the defaults are validated as they are.
	require.NoError(t, Decode(nil, &r, Options{}))
	assert.Equal(t, []string{"leaf 1", "leaf 2", "mid", "root"}, log)
}

func TestValidateEverywhere(t *testing.T) {
	doc := `mid:
  leaves: [{n: -1}, {n: 1}, {n: -3}]
  by_name:
    b: {n: -5}
    a: {n: -4}
    a.b: {n: -6}
  ptr: {n: -7}
`
	var r vRoot
	err := Decode([]byte(doc), &r, Options{})
	assert.Equal(t, []string{
		"mid.leaves[0]: n must not be negative, got -1",
		"mid.leaves[2]: n must not be negative, got -3",
		"mid.by_name.a: n must not be negative, got -4",
		`mid.by_name["a.b"]: n must not be negative, got -6`,
		"mid.by_name.b: n must not be negative, got -5",
		"mid.ptr: n must not be negative, got -7",
		"mid.leaves: at most 2 leaves, got 3",
	}, messages(t, err))
	kes := keyErrors(t, err)
	assert.Equal(t, 2, kes[0].Line, "a Validate problem at a key in the document has its line")
	assert.Equal(t, 2, kes[6].Line)
}

func TestValidateAfterDecodeErrors(t *testing.T) {
	var r vRoot
	err := Decode([]byte("mid:\n  leaves: [{n: -1}, {n: x}]\n"), &r, Options{})
	assert.Equal(t, []string{
		`mid.leaves[1].n: expected an integer, got "x"`,
		"mid.leaves[0]: n must not be negative, got -1",
	}, messages(t, err))
}

// Nested joins and KeyErrors inside KeyErrors are flattened and re-rooted.
type vNested struct {
	Inner vNestedInner `yaml:"inner"`
}

type vNestedInner struct {
	X int `yaml:"x"`
}

func (v *vNestedInner) Validate() error {
	sub := errors.Join(
		&KeyError{Key: "a", Err: errors.New("bad a")},
		errors.Join(errors.New("bad self"), &KeyError{Key: "[2].b", Err: errors.New("bad b")}),
	)
	var p Problems
	p.Wrap("list", sub)
	p.Wrap("ignored", nil)
	p.Add("", "whole struct: %w", errors.New("cause"))
	return errors.Join(
		p.Err(),
		&KeyError{Key: "deep", Err: &KeyError{Key: "er", Err: errors.New("two levels")}},
		fmt.Errorf("kept: %w and %w", errors.New("one"), errors.New("two")),
	)
}

func TestValidateFlattensNestedErrors(t *testing.T) {
	var v vNested
	err := Decode([]byte("inner: {x: 1}\n"), &v, Options{})
	assert.Equal(t, []string{
		"inner.list.a: bad a",
		"inner.list: bad self",
		"inner.list[2].b: bad b",
		"inner: whole struct: cause",
		"inner.deep.er: two levels",
		"inner: kept: one and two",
	}, messages(t, err))
	// The cause of an Add is still reachable.
	kes := keyErrors(t, err)
	assert.Equal(t, "cause", errors.Unwrap(kes[3].Err).Error())
}

// An embedded struct's promoted Validate is called once, at the parent.
type vEmbedded struct {
	Port int `yaml:"port"`
}

func (e *vEmbedded) Validate() error {
	if e.Port == 0 {
		return &KeyError{Key: "port", Err: errors.New("must be set")}
	}
	return nil
}

type vPromoted struct {
	vEmbedded `yaml:",inline"`
	Name      string `yaml:"name"`
}

// vShadowed has its own Validate, which shadows the embedded one (as in Go,
// it must call it itself).
type vShadowed struct {
	vEmbedded `yaml:",inline"`
	Name      string `yaml:"name"`
}

func (s *vShadowed) Validate() error {
	var p Problems
	p.Wrap("", s.vEmbedded.Validate())
	if s.Name == "" {
		p.Add("name", "must be set")
	}
	return p.Err()
}

// vNamedInline inlines a named field: its Validate is not promoted, so it is
// called for the field, at the parent's path.
type vNamedInline struct {
	Base vEmbedded `yaml:",inline"`
	Name string    `yaml:"name"`
}

type vHolder struct {
	Promoted vPromoted    `yaml:"promoted"`
	Shadowed vShadowed    `yaml:"shadowed"`
	Named    vNamedInline `yaml:"named"`
}

func TestValidateEmbedded(t *testing.T) {
	var h vHolder
	err := Decode([]byte("promoted: {name: a}\nshadowed: {port: 1}\nnamed: {}\n"), &h, Options{})
	assert.Equal(t, []string{
		"promoted.port: must be set",
		"shadowed.name: must be set",
		"named.port: must be set",
	}, messages(t, err))
}

// Value receivers work too.
type vValue struct {
	S string `yaml:"s"`
}

func (v vValue) Validate() error {
	if v.S == "" {
		return errors.New("s is empty")
	}
	return nil
}

func TestValidateValueReceiver(t *testing.T) {
	var h struct {
		V  vValue            `yaml:"v"`
		M  map[string]vValue `yaml:"m"`
		P  *vValue           `yaml:"p"`
		NP *vValue           `yaml:"np"`
	}
	err := Decode([]byte("v: {}\nm: {x: {}}\np: {s: ok}\n"), &h, Options{})
	assert.Equal(t, []string{"v: s is empty", "m.x: s is empty"}, messages(t, err))
}

func TestValidateCyclicPointers(t *testing.T) {
	type node struct {
		Next *node `yaml:"next"`
	}
	n := &node{}
	n.Next = n
	require.NoError(t, Decode(nil, n, Options{}))
}

func TestProblems(t *testing.T) {
	var p Problems
	require.NoError(t, p.Err())
	p.Wrap("x", nil)
	require.NoError(t, p.Err())

	p.Add("address", "must be set, e.g. %s", "0.0.0.0:1883")
	p.Add("", "is broken")
	p.Wrap("tls", &KeyError{Key: "cert_file", Line: 7, Err: errors.New("missing")})
	p.Wrap("users[0]", errors.New("plain"))
	err := p.Err()
	assert.Equal(t, []string{
		"address: must be set, e.g. 0.0.0.0:1883",
		"is broken",
		"tls.cert_file: missing",
		"users[0]: plain",
	}, messages(t, err))
	kes := keyErrors(t, err)
	assert.Equal(t, 7, kes[2].Line, "Wrap keeps a line")
}

func TestJoinPath(t *testing.T) {
	tests := []struct{ prefix, rel, want string }{
		{"", "", ""},
		{"a", "", "a"},
		{"", "b", "b"},
		{"a", "b.c", "a.b.c"},
		{"a", "[1].b", "a[1].b"},
		{"a[0]", "tls.cert_file", "a[0].tls.cert_file"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, joinPath(tt.prefix, tt.rel), "%q + %q", tt.prefix, tt.rel)
	}
}

type secretHolder struct {
	Token string `yaml:"token" secret:"true"`
	Other string `yaml:"other"`
}

func (s *secretHolder) Validate() error {
	var p Problems
	if s.Token == "" {
		p.Add("token", "required (or token_file)")
	}
	if s.Other == "" {
		p.Add("other", "required")
	}
	return p.Err()
}

// A value that could not be read is one problem, not also "required".
func TestUnreadValueIsReportedOnce(t *testing.T) {
	env := func(string) (string, bool) { return "", false }
	missing := func(string) ([]byte, error) { return nil, fmt.Errorf("open x: %w", fs.ErrNotExist) }
	for doc, want := range map[string][]string{
		"token: ${UNSET}\nother: ${ALSO_UNSET}": {
			"token: environment variable UNSET is not set (use ${UNSET:-} to allow empty)",
			"other: environment variable ALSO_UNSET is not set (use ${ALSO_UNSET:-} to allow empty)",
		},
		"token_file: /run/x\nother: y": {"token_file: open x: file does not exist"},
		"other: y":                     {"token: required (or token_file)"},
	} {
		var s secretHolder
		err := Decode([]byte(doc), &s, Options{LookupEnv: env, ReadFile: missing})
		assert.Equal(t, want, messages(t, err), doc)
	}
	var s secretHolder
	err := Decode([]byte("token: ${UNSET}\nother: y"), &s, Options{LookupEnv: env})
	assert.True(t, errors.Is(err, ErrUnsetVariable))
}
