package metric

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The declared names, help texts, labels and buckets are what a scrape shows.
func TestDeclaredMetricsScrapeAsDeclared(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := Counter("t_events_total", "Events seen.")
	cv := CounterVec("t_requests_total", "Requests by route and code.", "route", "code")
	g := Gauge("t_open", "Open now.")
	h := HistogramVec("t_duration_seconds", "Duration by route.", []float64{0.5, 1}, "route")
	if err := Register(reg, c, cv, g, h); err != nil {
		t.Fatal(err)
	}
	c.Add(2)
	cv.WithLabelValues("/a", "200").Inc()
	g.Set(3)
	h.WithLabelValues("/a").Observe(0.7)

	want := `
# HELP t_duration_seconds Duration by route.
# TYPE t_duration_seconds histogram
t_duration_seconds_bucket{route="/a",le="0.5"} 0
t_duration_seconds_bucket{route="/a",le="1"} 1
t_duration_seconds_bucket{route="/a",le="+Inf"} 1
t_duration_seconds_sum{route="/a"} 0.7
t_duration_seconds_count{route="/a"} 1
# HELP t_events_total Events seen.
# TYPE t_events_total counter
t_events_total 2
# HELP t_open Open now.
# TYPE t_open gauge
t_open 3
# HELP t_requests_total Requests by route and code.
# TYPE t_requests_total counter
t_requests_total{code="200",route="/a"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

func TestRegisterOnNilRegistersNothing(t *testing.T) {
	if err := Register(nil, Counter("t_total", "Counted.")); err != nil {
		t.Fatal(err)
	}
}

// Register stops at the first collector that cannot be registered and
// returns the registry's error unchanged.
func TestRegisterReturnsTheRegistrysError(t *testing.T) {
	reg := prometheus.NewRegistry()
	first := Counter("t_dup_total", "First.")
	if err := Register(reg, first); err != nil {
		t.Fatal(err)
	}
	after := Gauge("t_after", "Never registered.")
	err := Register(reg, Counter("t_dup_total", "First."), after)
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) || are.ExistingCollector != first {
		t.Fatalf("Register of a duplicate = %v, want AlreadyRegisteredError naming the first counter", err)
	}
	if reg.Unregister(after) {
		t.Fatal("the collector after the failing one was registered")
	}
}
