// Package metric declares firehose's Prometheus collectors in one line each:
// a name, a help text and the label names, instead of an Opts literal per
// metric. It adds nothing to what client_golang does; the names and help texts
// stay where the metrics are used, so a grep for a metric's name finds its
// declaration.
package metric

import "github.com/prometheus/client_golang/prometheus"

// Counter returns an unregistered counter.
func Counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// CounterVec returns an unregistered counter partitioned by labels.
func CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// Gauge returns an unregistered gauge.
func Gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

// HistogramVec returns an unregistered histogram with the given buckets,
// partitioned by labels.
func HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

// Register registers every collector with reg, in order, and returns the
// first error unchanged (a duplicate name, say), so that callers can still
// test it for prometheus.AlreadyRegisteredError. Collectors registered before
// the error stay registered. A nil reg registers nothing: components take an
// optional Registerer.
func Register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
