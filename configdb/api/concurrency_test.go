package api

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
)

// TestConcurrentWriters: N writers doing keys set on one document lose no
// update; N read-modify-write loops with If-Match lose no increment.
func TestConcurrentWriters(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, serverOptions{})
		s.fuelSetup()
		doc := "/environments/1/nodes/node-1/resources/astute/values"
		s.must(204, "PUT", doc, map[string]any{"counter": 0})
		const writers, each = 8, 8
		var wg sync.WaitGroup
		errs := make(chan string, 2*writers*each)
		for w := range writers {
			wg.Add(2)
			go func() {
				defer wg.Done()
				for i := range each {
					key := fmt.Sprintf("w%d-%d", w, i)
					if r := s.do("PUT", doc+"/keys/set", [][]any{{key, i}}); r.status != 204 {
						errs <- fmt.Sprintf("%s: %d %s", key, r.status, r.body)
					}
				}
			}()
			go func() {
				defer wg.Done()
				for range each {
					for {
						r := s.do("GET", doc, nil)
						var m map[string]any
						if err := json.Unmarshal(r.body, &m); err != nil {
							errs <- err.Error()
							return
						}
						m["counter"] = m["counter"].(float64) + 1
						put := s.do("PUT", doc, m, "If-Match", r.header.Get("ETag"))
						if put.status == 204 {
							break
						}
						if put.status != 412 {
							errs <- fmt.Sprintf("PUT: %d %s", put.status, put.body)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
		var m map[string]any
		if err := json.Unmarshal(s.must(200, "GET", doc, nil).body, &m); err != nil {
			t.Fatal(err)
		}
		if len(m) != writers*each+1 || m["counter"] != float64(writers*each) {
			t.Fatalf("%d keys and counter %v; want %d keys and counter %d", len(m)-1, m["counter"], writers*each, writers*each)
		}
	})
}
