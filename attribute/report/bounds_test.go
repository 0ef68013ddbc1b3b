package report

import (
	"math"
	"testing"
)

// Values near ±2^63 (a crafted profile's) format without overflowing: -v
// of MinInt64 is MinInt64 again. 2^63 B is 8 EiB.
func TestFormatBytesExtremes(t *testing.T) {
	for v, want := range map[int64]string{math.MinInt64: "-8.0 EiB", math.MaxInt64: "8.0 EiB", -1023: "-1023 B", 1536: "1.5 KiB"} {
		if got := FormatBytes(v); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", v, got, want)
		}
	}
}
