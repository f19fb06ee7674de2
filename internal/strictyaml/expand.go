package strictyaml

import (
	"fmt"
	"strings"

	"github.com/opsfirehose/firehose/internal/ellipsis"
)

// expandEnv replaces ${VAR} and ${VAR:-default} in s. "$${" is a literal
// "${"; any other '$' is literal. It returns every problem found; the
// returned string is only meaningful when there are none. Substituted values
// are not expanded again.
func expandEnv(s string, lookup func(string) (string, bool)) (string, []error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	var errs []error
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c != '$':
			b.WriteByte(c)
			i++
			continue
		case strings.HasPrefix(s[i:], "$${"):
			b.WriteString("${")
			i += 3
			continue
		case !strings.HasPrefix(s[i:], "${"):
			b.WriteByte('$')
			i++
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			errs = append(errs, fmt.Errorf("unterminated %s: add the closing } (or write $${ for a literal ${)", clip(s[i:])))
			break
		}
		body := s[i+2 : i+2+end]
		i += 2 + end + 1
		name, def, hasDefault := strings.Cut(body, ":-")
		if !validEnvName(name) {
			errs = append(errs, fmt.Errorf("invalid reference %s: a variable name has letters, digits and _ and does not start with a digit (write $${ for a literal ${)", clip("${"+body+"}")))
			continue
		}
		val, ok := lookup(name)
		switch {
		case hasDefault && (!ok || val == ""):
			val = def
		case !ok:
			errs = append(errs, unsetError{name})
			continue
		}
		b.WriteString(val)
	}
	return b.String(), errs
}

func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// clip shortens s for an error message: 40 bytes at most, "…" included,
// cut at a character boundary.
func clip(s string) string { return ellipsis.Cut(s, 40) }

// unsetError is ErrUnsetVariable, naming the variable.
type unsetError struct{ name string }

func (e unsetError) Error() string {
	return fmt.Sprintf("environment variable %s is not set (use ${%s:-} to allow empty)", e.name, e.name)
}

func (e unsetError) Is(target error) bool { return target == ErrUnsetVariable }
