package benchkit

import (
	"fmt"
	"time"
)

// FormatDuration renders a latency for a report: µs below 1ms, then ms,
// then s; "-" for none.
func FormatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// FormatMicros renders a CPU cost in µs; "n/a" for unknown (negative).
func FormatMicros(us float64) string {
	if us < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", us)
}

// FormatPercent renders a CPU percentage; "n/a" for unknown (negative).
func FormatPercent(p float64) string {
	if p < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f%%", p)
}
