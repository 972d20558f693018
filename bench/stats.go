package main

import (
	"math"
	"slices"
	"time"
)

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// ms converts nanoseconds to milliseconds.
func ms(ns int64) float64 { return float64(ns) / 1e6 }

func durMs(d time.Duration) float64 { return float64(d) / 1e6 }

// mib converts bytes to MiB.
func mib(b int64) float64 { return float64(b) / (1 << 20) }
