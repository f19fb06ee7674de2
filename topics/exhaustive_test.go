package topics

import (
	"testing"
)

// strs returns every string of length 1..n over alphabet. The fuzzers explore
// at random; these tests walk every short combination of the bytes that the
// rules treat specially, so the corner cases do not depend on luck.
func strs(alphabet string, n int) []string {
	out := []string{""}
	var all []string
	for range n {
		var next []string
		for _, s := range out {
			for i := 0; i < len(alphabet); i++ {
				next = append(next, s+alphabet[i:i+1])
			}
		}
		all = append(all, next...)
		out = next
	}
	return all
}

func TestNATSMappingExhaustive(t *testing.T) {
	// Two alphabets: the separators with the percent layer's triggers, and
	// the hex digits of its other sequences (%25, %5F, %7F, %20).
	inputs := append(strs("a/.%2A *>", 5), strs("%257F/.\x7f\t", 5)...)
	seen := make(map[string]string)
	for _, s := range inputs {
		if ValidName(s) == nil {
			subj, err := ToSubject(DefaultSubjectPrefix, s)
			if err != nil {
				t.Fatalf("ToSubject(%q): %v", s, err)
			}
			if prev, dup := seen[subj]; dup && prev != s {
				t.Fatalf("%q and %q both map to %q", prev, s, subj)
			}
			seen[subj] = s
			back, err := FromSubject(DefaultSubjectPrefix, subj)
			if err != nil || back != s {
				t.Fatalf("FromSubject(ToSubject(%q) = %q) = %q, %v", s, subj, back, err)
			}
			if natsServerMaps(s) {
				ref, _ := refMQTTToNATSSubjectConversion([]byte(s), false)
				if "firehose."+string(ref) != subj {
					t.Fatalf("ToSubject(%q) = %q, nats-server gives %q", s, subj, ref)
				}
			}
		}
		subj := DefaultSubjectPrefix + "." + s
		if topic, err := FromSubject(DefaultSubjectPrefix, subj); err == nil {
			if again, err := ToSubject(DefaultSubjectPrefix, topic); err != nil || again != subj {
				t.Fatalf("ToSubject(FromSubject(%q) = %q) = %q, %v", subj, topic, again, err)
			}
		}
	}
}

func TestMatchExhaustive(t *testing.T) {
	var filters, names []string
	for _, s := range strs("a/+#$", 4) {
		if ValidFilter(s) == nil {
			filters = append(filters, s)
		}
	}
	for _, s := range strs("ab/$", 4) {
		if ValidName(s) == nil {
			names = append(names, s)
		}
	}
	for _, f := range filters {
		for _, n := range names {
			m := Match(f, n)
			if m != refMatch(f, n) {
				t.Fatalf("Match(%q, %q) = %v, reference says %v", f, n, m, !m)
			}
			if Overlap(f, n) != m || Overlap(n, f) != m {
				t.Fatalf("Overlap(%q, %q) != Match = %v", f, n, m)
			}
		}
		for _, g := range filters {
			o := Overlap(f, g)
			w, ok := overlapWitness(f, g)
			if o != ok || o != Overlap(g, f) {
				t.Fatalf("Overlap(%q, %q) = %v, witness %q, %v", f, g, o, w, ok)
			}
			if ok && !(Match(f, w) && Match(g, w)) {
				t.Fatalf("witness %q does not match both %q and %q", w, f, g)
			}
			// Every shared name proves an overlap.
			if !o {
				for _, n := range names {
					if Match(f, n) && Match(g, n) {
						t.Fatalf("Overlap(%q, %q) = false, but both match %q", f, g, n)
					}
				}
			}
		}
	}
}
