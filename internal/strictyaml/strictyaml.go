package strictyaml

import (
	"errors"
	"fmt"
	"os"
	"reflect"

	"go.yaml.in/yaml/v3"
)

// Options adjusts how Decode reaches the outside world. The zero value uses
// the process environment and the file system.
type Options struct {
	// LookupEnv resolves ${VAR} references; nil means os.LookupEnv.
	LookupEnv func(name string) (string, bool)
	// ReadFile reads *_file secrets; nil means os.ReadFile. Relative paths
	// are used as given (relative to the working directory).
	ReadFile func(path string) ([]byte, error)
}

// ErrUnsetVariable is the problem of a ${VAR} reference to a variable that
// is not set (and has no default).
var ErrUnsetVariable = errors.New("environment variable is not set")

// KeyError is one problem at one key.
type KeyError struct {
	// Key is the dotted path of the key, e.g.
	// "broker.listeners[1].tls.cert_file", or "" for the document root.
	Key string
	// Line is the 1-based line in the YAML, or 0 when unknown (for example
	// for a Validate problem about a key the document does not contain).
	Line int
	// Err is the problem itself.
	Err error
}

// Error returns "key: problem", or just the problem for the document root.
// The line is not part of the message; callers who want it read Line.
func (e *KeyError) Error() string {
	msg := "invalid value"
	if e.Err != nil {
		msg = e.Err.Error()
	}
	if e.Key == "" {
		return msg
	}
	return e.Key + ": " + msg
}

// Unwrap returns the underlying problem.
func (e *KeyError) Unwrap() error { return e.Err }

// Decode decodes one YAML document into out, a non-nil pointer to a struct
// that the caller has pre-filled with defaults. Keys absent from the
// document keep their defaults. An empty document (or only comments, or
// null) leaves out unchanged and is not an error.
//
// After decoding, and also when decoding found problems, every value in out
// whose pointer implements Validate() error is validated, children before
// parents.
//
// Decode returns nil, or an errors.Join of *KeyError: the decoding problems
// in document order, then the validation problems.
func Decode(data []byte, out any, opts Options) error {
	rv := reflect.ValueOf(out)
	if !rv.IsValid() || rv.Kind() != reflect.Pointer || rv.IsNil() {
		return errors.Join(&KeyError{Err: fmt.Errorf("strictyaml: Decode needs a non-nil pointer to a struct, got %T", out)})
	}
	d := newDecoder(opts)
	root, extra := parseDocument(data)
	if root != nil {
		d.start(root)
		d.decodeValue(root, rv.Elem(), "", modeExpand)
	}
	if extra != nil {
		d.errs = append(d.errs, extra)
	}
	// A key whose value could not be read (an unset variable, a missing
	// secret file) is reported once: the Validate problems that follow
	// from it ("required") at that key, or at its secret's other form, are
	// left out.
	d.unread = map[string]bool{}
	for _, e := range d.errs {
		if ke, ok := e.(*KeyError); ok {
			d.unread[ke.Key] = true
		}
	}
	d.validate(rv.Elem(), "", false)
	if len(d.errs) == 0 {
		return nil
	}
	return errors.Join(d.errs...)
}

func newDecoder(opts Options) *decoder {
	d := &decoder{
		lookupEnv: opts.LookupEnv,
		readFile:  opts.ReadFile,
		structs:   make(map[reflect.Type]*structInfo),
		active:    make(map[*yaml.Node]bool),
		lines:     make(map[string]int),
		visited:   make(map[visit]bool),
	}
	if d.lookupEnv == nil {
		d.lookupEnv = os.LookupEnv
	}
	if d.readFile == nil {
		d.readFile = os.ReadFile
	}
	return d
}

// Problems collects validation errors for a Validate method:
//
//	func (c *Listener) Validate() error {
//		var p strictyaml.Problems
//		if c.Address == "" {
//			p.Add("address", "must be set, e.g. 0.0.0.0:1883")
//		}
//		p.Wrap("tls", c.TLS.check())
//		return p.Err()
//	}
//
// The zero value is ready to use.
type Problems struct {
	errs []error
}

// Add records a problem at key, which is relative to the validated struct
// ("" for the struct itself). The message is formatted with fmt.Errorf, so
// %w works.
func (p *Problems) Add(key string, format string, args ...any) {
	p.errs = append(p.errs, &KeyError{Key: key, Err: fmt.Errorf(format, args...)})
}

// Wrap records err at key, which is relative to the validated struct ("" for
// the struct itself). *KeyError values inside err (also inside errors.Join)
// are re-rooted under key; any other error is recorded at key. A nil err is
// ignored.
func (p *Problems) Wrap(key string, err error) {
	for _, ke := range reroot(key, err, 0) {
		p.errs = append(p.errs, ke)
	}
}

// Err returns nil when no problem was recorded, else an errors.Join of
// *KeyError.
func (p *Problems) Err() error {
	if len(p.errs) == 0 {
		return nil
	}
	return errors.Join(p.errs...)
}

// reroot flattens err into *KeyError values whose keys are prefixed with
// prefix. Joined errors are flattened; a *KeyError's Key is appended to
// prefix; any other error is reported at prefix itself. line is used for
// errors that carry none.
func reroot(prefix string, err error, line int) []*KeyError {
	if err == nil {
		return nil
	}
	if ke, ok := err.(*KeyError); ok {
		key := joinPath(prefix, ke.Key)
		if ke.Line != 0 {
			line = ke.Line
		}
		if ke.Err != nil && isComposite(ke.Err) {
			return reroot(key, ke.Err, line)
		}
		return []*KeyError{{Key: key, Line: line, Err: ke.Err}}
	}
	if errs, ok := joined(err); ok {
		var out []*KeyError
		for _, e := range errs {
			out = append(out, reroot(prefix, e, line)...)
		}
		return out
	}
	return []*KeyError{{Key: prefix, Line: line, Err: err}}
}

func isComposite(err error) bool {
	if _, ok := err.(*KeyError); ok {
		return true
	}
	_, ok := joined(err)
	return ok
}

// joined reports whether err is a plain errors.Join (its message is exactly
// its parts' messages, one per line) and returns the parts. An error that
// wraps several errors with text of its own (fmt.Errorf with two %w) is not
// flattened, so its text is kept.
func joined(err error) ([]error, bool) {
	u, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return nil, false
	}
	parts := u.Unwrap()
	msg := ""
	n := 0
	for _, e := range parts {
		if e == nil {
			continue
		}
		if n > 0 {
			msg += "\n"
		}
		msg += e.Error()
		n++
	}
	if msg != err.Error() {
		return nil, false
	}
	return parts, true
}
