package configdb

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkMerge measures merging three levels of canonical documents (a
// root of 2000 keys with nested values, and two overrides), the work behind
// an effective-values read that misses the cache, and splitting one document
// into its members, which diffKeys does for every change event.
func BenchmarkMerge(b *testing.B) {
	doc := func(n, step int, tag string) []byte {
		var parts []string
		for i := 0; i < n; i += step {
			parts = append(parts, fmt.Sprintf(`"key%05d":{"name":"%s value %d","list":[1,2.5,true,null,"x\"y"],"nested":{"a":"b"}}`, i, tag, i))
		}
		canon, err := Canonical([]byte("{" + strings.Join(parts, ",") + "}"))
		if err != nil {
			b.Fatal(err)
		}
		return canon
	}
	sources := []source{{body: doc(2000, 1, "root"), level: 0}, {body: doc(2000, 7, "env"), level: 1}, {body: doc(2000, 50, "node"), level: 2}}
	paths := []string{"/", "/env/", "/env/node/"}
	size := 0
	for _, s := range sources {
		size += len(s.body)
	}
	b.Run("merge", func(b *testing.B) {
		var mg merger
		b.SetBytes(int64(size))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := mg.merge(sources, paths); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("splitObject", func(b *testing.B) {
		b.SetBytes(int64(len(sources[0].body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := splitObject(sources[0].body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
