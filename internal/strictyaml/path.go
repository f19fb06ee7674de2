package strictyaml

import (
	"strconv"
	"strings"
	"unicode"
)

// keyPath appends a mapping key to a path: "broker" + "address" gives
// "broker.address". Keys that would make the path ambiguous (empty, or
// containing '.', '[', ']', '"', spaces or control characters) are quoted:
// `broker.users["a.b"]`.
func keyPath(parent, key string) string {
	if needsQuote(key) {
		return parent + "[" + strconv.Quote(key) + "]"
	}
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// indexPath appends a sequence index to a path: "listeners[1]".
func indexPath(parent string, i int) string {
	return parent + "[" + strconv.Itoa(i) + "]"
}

// joinPath appends a relative path (as returned by a Validate method) to
// prefix.
func joinPath(prefix, rel string) string {
	switch {
	case rel == "":
		return prefix
	case prefix == "":
		return rel
	case rel[0] == '[':
		return prefix + rel
	default:
		return prefix + "." + rel
	}
}

func needsQuote(key string) bool {
	if key == "" {
		return true
	}
	if strings.ContainsAny(key, `.[]"`) {
		return true
	}
	for _, r := range key {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
	}
	return false
}
