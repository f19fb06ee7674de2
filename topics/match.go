package topics

import "strings"

// nextLevel splits s at its first '/'. more is false when level is the last
// one. It exists so that matching walks levels without strings.Split's
// allocation.
func nextLevel(s string) (level, rest string, more bool) {
	i := strings.IndexByte(s, '/')
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}

// dollarHidden reports whether the MQTT '$' rule hides topic from filter: a
// filter whose first level is a wildcard does not match a topic whose first
// level starts with '$' (MQTT-4.7.2-1), so that "#" does not see "$SYS/...".
func dollarHidden(filter, topic string) bool {
	return len(topic) > 0 && topic[0] == '$' && startsWithWildcard(filter)
}

func startsWithWildcard(filter string) bool {
	return len(filter) > 0 && (filter[0] == '+' || filter[0] == '#') &&
		(len(filter) == 1 || filter[1] == '/')
}

// Match reports whether the MQTT topic filter matches the topic name, with the
// MQTT rules: '+' matches exactly one level, which may be empty; '#' matches
// the rest of the levels, zero or more, so "a/#" matches "a"; levels may be
// empty ("a//b", "/a", "a/"); and a filter whose first level is '+' or '#'
// does not match a topic whose first level starts with '$'.
//
// filter should pass [ValidFilter] and not be a shared subscription (split it
// with [SplitShared] first); topic should pass [ValidName]. For other inputs
// the result is unspecified, but Match never panics. Match does not allocate.
func Match(filter, topic string) bool {
	if dollarHidden(filter, topic) {
		return false
	}
	for {
		fl, frest, fmore := nextLevel(filter)
		if fl == "#" {
			return true
		}
		tl, trest, tmore := nextLevel(topic)
		if fl != "+" && fl != tl {
			return false
		}
		switch {
		case !fmore:
			return !tmore
		case !tmore:
			// Only "#" can match the zero levels that remain of the topic.
			return frest == "#"
		}
		filter, topic = frest, trest
	}
}

// Overlap reports whether at least one topic name is matched by both filters,
// with the same rules as [Match], including the '$' rule. A topic name is a
// filter without wildcards, so Overlap(allowed, name) == Match(allowed, name);
// subscribe ACLs use Overlap to decide whether a requested filter can reach a
// topic that an allowed filter covers.
//
// Both filters should pass [ValidFilter] and not be shared subscriptions; for
// other inputs the result is unspecified, but Overlap never panics. Overlap
// does not allocate.
func Overlap(a, b string) bool {
	// With the '$' rule, a filter starting with a wildcard only reaches topics
	// whose first level does not start with '$'. If the other filter's first
	// level is literal, that literal decides; if it is a wildcard too, a
	// plain first level such as "x" satisfies both.
	if startsWithWildcard(a) && len(b) > 0 && b[0] == '$' {
		return false
	}
	if startsWithWildcard(b) && len(a) > 0 && a[0] == '$' {
		return false
	}
	for first := true; ; first = false {
		al, arest, amore := nextLevel(a)
		bl, brest, bmore := nextLevel(b)
		if al == "#" || bl == "#" {
			// '#' takes any remainder, and every remainder of a valid
			// filter matches some levels.
			return true
		}
		if al != "+" && bl != "+" && al != bl {
			return false
		}
		// A topic of one empty level would be the empty string, which is
		// not a topic name: "+" and "/#" both match "", yet they do not
		// overlap.
		oneEmpty := first && (al == "" || bl == "")
		switch {
		case !amore && !bmore:
			return !oneEmpty
		case !amore:
			return brest == "#" && !oneEmpty
		case !bmore:
			return arest == "#" && !oneEmpty
		}
		a, b = arest, brest
	}
}
