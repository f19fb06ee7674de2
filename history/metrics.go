package history

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/opsfirehose/firehose/internal/metric"
)

// metrics are the history's: what was stored and left out, counted as it
// happens, and the stream's state, read from the store at each scrape.
type metrics struct {
	h           *History
	stored      prometheus.Counter
	storedBytes prometheus.Counter
	lost        *prometheus.CounterVec // by reason: queue_full, store_error

	removed  *prometheus.Desc // by reason: age, size
	messages *prometheus.Desc
	bytes    *prometheus.Desc
	oldest   *prometheus.Desc

	mu        sync.Mutex
	firstSeq  uint64    // the number of the stream's oldest message at the last scrape (pack.go)
	firstTime time.Time // when it was stored; zero for none
	bySize    float64
	byAge     float64
}

func newMetrics(h *History) *metrics {
	m := &metrics{
		h: h,
		stored: metric.Counter("firehose_history_stored_total",
			"Messages written to the history."),
		storedBytes: metric.Counter("firehose_history_stored_bytes_total",
			"Payload bytes written to the history."),
		lost: metric.CounterVec("firehose_history_lost_total",
			"Messages left out of the history, by reason: queue_full (the writer is behind: history.queue_size), store_error (the store refused them or is down). Live traffic is never affected.", "reason"),
		removed: prometheus.NewDesc("firehose_history_removed_total",
			"Messages the history dropped, oldest first, by reason: age (history.max_age) or size (history.max_bytes). Counted since the bridge started.", []string{"reason"}, nil),
		messages: prometheus.NewDesc("firehose_history_messages", "Messages in the history.", nil, nil),
		bytes:    prometheus.NewDesc("firehose_history_bytes", "Bytes the history's stream holds.", nil, nil),
		oldest: prometheus.NewDesc("firehose_history_oldest_age_seconds",
			"Age of the oldest message in the history: how far back a replay reaches.", nil, nil),
	}
	for _, r := range []string{"queue_full", "store_error"} {
		m.lost.WithLabelValues(r)
	}
	return m
}

// Describe is prometheus.Collector's.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	m.stored.Describe(ch)
	m.storedBytes.Describe(ch)
	m.lost.Describe(ch)
	for _, d := range []*prometheus.Desc{m.removed, m.messages, m.bytes, m.oldest} {
		ch <- d
	}
}

// Collect is prometheus.Collector's. The stream's state is read at each
// scrape; what it dropped since the last is put down to size when the
// stream is at history.max_bytes, and to age otherwise.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.stored.Collect(ch)
	m.storedBytes.Collect(ch)
	m.lost.Collect(ch)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, msgs, first, err := m.h.bounds(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		if m.firstSeq != 0 && first > m.firstSeq {
			dropped := float64(first - m.firstSeq)
			// Age when the oldest seen last was past max_age; else size
			// when the stream is within a full pack of max_bytes.
			pastAge := !m.firstTime.IsZero() && time.Since(m.firstTime) >= m.h.cfg.MaxAge
			if !pastAge && st.Bytes+maxPackBytes >= uint64(m.h.cfg.MaxBytes) {
				m.bySize += dropped
			} else {
				m.byAge += dropped
			}
		}
		m.firstSeq = first
		m.firstTime = time.Time{}
		if st.Msgs > 0 {
			m.firstTime = st.FirstTime
		}
		ch <- prometheus.MustNewConstMetric(m.messages, prometheus.GaugeValue, float64(msgs))
		ch <- prometheus.MustNewConstMetric(m.bytes, prometheus.GaugeValue, float64(st.Bytes))
		age := 0.0
		if st.Msgs > 0 {
			age = max(time.Since(st.FirstTime).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(m.oldest, prometheus.GaugeValue, age)
	}
	ch <- prometheus.MustNewConstMetric(m.removed, prometheus.CounterValue, m.byAge, "age")
	ch <- prometheus.MustNewConstMetric(m.removed, prometheus.CounterValue, m.bySize, "size")
}

// bounds reads the stream's state, how many messages it holds (not
// packs), and the number of the oldest one kept, or of the next one when
// the stream is empty: what was dropped is below it.
func (h *History) bounds(ctx context.Context) (st jetstream.StreamState, msgs, firstKept uint64, err error) {
	st, first, end, numbered, err := h.st.bounds(ctx)
	switch {
	case err != nil:
		return st, 0, 0, err
	case st.Msgs == 0:
		return st, 0, h.nextNumber.Load(), nil
	case !numbered:
		// Packs without numbers (not this version's): count packs.
		return st, st.Msgs, st.FirstSeq, nil
	}
	return st, end - first, first, nil
}
