package ansible

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkMessages measures validating and routing a batch of 100 task
// events (the hot path of the intake, without HTTP and the broker).
func BenchmarkMessages(b *testing.B) {
	h, err := New(DefaultConfig(), Options{Publisher: nopPublisher{}})
	if err != nil {
		b.Fatal(err)
	}
	task := mustRead(b, "testdata/task-ok/input.json")
	var events []string
	for i := 0; i < 100; i++ {
		events = append(events, strings.Replace(task, `"alpha"`, fmt.Sprintf(`"web%03d/x"`, i), 1))
	}
	body := []byte("[" + strings.Join(events, ",") + "]")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, p := h.messages(body); p != nil {
			b.Fatal(p.msg)
		}
	}
}
