package chef

import (
	"encoding/json"
	"testing"
)

// BenchmarkParse compares parsing the 260 KB converge fixture with decoding
// it into a map, the bench/chef baseline's work.
func BenchmarkParse(b *testing.B) {
	body := fixture(b, "02_run_converge_success_chef12_ubuntu")
	for _, mode := range []Validation{ValidationCompatible, ValidationOff} {
		p, err := NewParser(mode)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(mode.String(), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Parse(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("unmarshal-map", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
