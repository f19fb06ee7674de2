package jsonscan

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkCheck compares checking the 260 KB converge fixture with
// encoding/json's checking and decoding of it.
func BenchmarkCheck(b *testing.B) {
	body, err := os.ReadFile(filepath.Join("..", "..", "adapters", "chef", "testdata",
		"02_run_converge_success_chef12_ubuntu", "input.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Check", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if err := Check(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			json.Valid(body)
		}
	})
	b.Run("json.Unmarshal-map", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var m map[string]any
			_ = json.Unmarshal(body, &m)
		}
	})
}
