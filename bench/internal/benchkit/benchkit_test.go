package benchkit

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestPct(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	for p, want := range map[float64]float64{0: 1, 50: 3, 80: 4, 99: 5, 100: 5} {
		if got := Pct(xs, p); got != want {
			t.Errorf("Pct(%v, %v) = %v, want %v", xs, p, got, want)
		}
	}
	if xs[0] != 5 {
		t.Errorf("Pct sorted its input: %v", xs)
	}
	if !math.IsNaN(Pct(nil, 50)) {
		t.Error("Pct of nothing is not NaN")
	}
}

// ReleaseFIFO waits for the reader to open the FIFO, then lets its open return; with no
// reader it gives up after its bound, naming the path.
func TestReleaseFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hold")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	opened := make(chan error, 1)
	go func() {
		f, err := os.Open(path) // blocks until a writer opens it
		if err == nil {
			f.Close()
		}
		opened <- err
	}()
	if err := ReleaseFIFO(path, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("the reader's open: %v", err)
	}
	if err := ReleaseFIFO(path, 20*time.Millisecond); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("no reader: %v, want an error naming %s", err, path)
	}
}

func TestLines(t *testing.T) {
	var l Lines
	l.Add(5, "conch: waiting")
	l.Add(9, "conch: slot held (rev 3)")
	l.Add(12, "conch: slot held again")
	if at, ok := l.First("slot held"); !ok || at != 9 {
		t.Errorf("First(slot held) = %d, %v; want 9, true", at, ok)
	}
	if _, ok := l.First("released"); ok {
		t.Error("First found a line that was never added")
	}
	if got := l.Text(); got != "conch: waiting\nconch: slot held (rev 3)\nconch: slot held again\n" {
		t.Errorf("Text = %q", got)
	}
	all := l.All()
	all[0].Text = "changed"
	if l.All()[0].Text != "conch: waiting" {
		t.Error("All shares its slice with Lines")
	}
}
