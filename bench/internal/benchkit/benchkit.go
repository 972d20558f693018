// Package benchkit holds what the benchmark harness (bench) and its systemd scenario
// (bench/scope) both need: percentiles, and ending a FIFO hold.
package benchkit

import (
	"fmt"
	"math"
	"os"
	"slices"
	"syscall"
	"time"
)

// Pct is the p-th percentile (0..100) of xs by nearest rank; NaN when xs is empty. xs is not
// modified.
func Pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// ReleaseFIFO ends a hold on the FIFO at path (a child blocked opening it for reading):
// it opens it for writing without blocking, retried every millisecond while no reader has it
// open yet (ENXIO), for up to within, and closes it. The error names path.
func ReleaseFIFO(path string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			return f.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("release %s: %w", path, err)
		}
		time.Sleep(time.Millisecond)
	}
}
