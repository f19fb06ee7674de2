package history

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkRecordAndWrite records messages of about 512 bytes with their
// headers, in chunks the queue holds, and waits for the writer to store
// each chunk: per message, what the history costs in all (cpu-ns/op: the
// whole process's CPU, nats-server's included). The payloads are JSON whose
// ids and times vary from message to message, or random bytes (which do
// not compress: the worst case). Direct records as the bridge's own
// messages are (History.RecordFields, into the queue's packs); stage as an
// MQTT publisher's are (Stage.RecordFields, into a pack of the publisher's
// own). The writer compresses both.
func BenchmarkRecordAndWrite(b *testing.B) {
	for _, name := range []string{"json/direct", "json/stage", "random/direct", "random/stage"} {
		kind, via, _ := strings.Cut(name, "/")
		b.Run(name, func(b *testing.B) {
			h, _ := open(b, DefaultConfig())
			random := rand.NewChaCha8([32]byte{})
			payloads := make([][]byte, 4096) // more than a pack holds: none repeats within one
			for i := range payloads {
				if kind == "random" {
					payloads[i] = make([]byte, 512)
					_, _ = random.Read(payloads[i])
					continue
				}
				payloads[i] = fmt.Appendf(nil, `{"node":"web-%012x.example.org","org":"chef","run_id":"%032x","status":"success",`+
					`"start_time":"2026-11-28T05:%02d:%02d.%03dZ","updated_resources":12,"total_resources":340,"environment":"production",`+
					`"policy_group":"prod","policy_name":"web","chef_version":"18.5.0","platform":"ubuntu","platform_version":"22.04",`+
					`"cookbooks":["base","nginx","ssh","users","ntp","monitoring","logrotate","sysctl"],"tags":[]}`,
					random.Uint64()&(1<<48-1), random.Uint64(), i%60, (i*7)%60, i%1000)
			}
			record := h.RecordFields
			if via == "stage" {
				s := h.NewStage()
				defer s.Close()
				record = s.RecordFields
			}
			// A chunk is a full batch: the writer takes it at once. A
			// smaller one waits out the writer's linger, whose idle
			// runtime work cpu-ns/op would count.
			const chunk = maxBatch
			b.ReportAllocs()
			cpu0 := processCPU()
			b.ResetTimer()
			for i := 0; i < b.N; i += chunk {
				n := min(chunk, b.N-i)
				h.mu.Lock()
				target := h.accepted + uint64(n)
				h.mu.Unlock()
				for j := range n {
					record("bench/history/1", payloads[(i+j)%len(payloads)], strconv.Itoa(i+j), "bench", "2026-11-28T05:00:00Z")
				}
				h.handOverAll() // as a reader does: what the stage holds is in the queue
				if err := h.caughtUp(context.Background(), target); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the CPU time this process has used: on a shared machine,
// steadier than the wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReplayWithManyPublishers begins a replay that finds nothing
// while 100,000 MQTT publishers are connected, each of which published
// once (a fleet's nodes): what a history request costs before it reads
// the store. Only the stages that hold a pack are handed over (restage
// bounds them), so that it does not grow with the publishers.
func BenchmarkReplayWithManyPublishers(b *testing.B) {
	h, _ := open(b, DefaultConfig())
	stages := make([]*Stage, 100_000)
	for i := range stages {
		stages[i] = h.NewStage()
		stages[i].RecordFields("fleet/node/"+strconv.Itoa(i), []byte("up"), "", "", "")
	}
	defer func() {
		for _, s := range stages {
			s.Close()
		}
	}()
	q := Query{Filters: []string{"nothing/here"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.Replay(context.Background(), q, func(Record) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
