package unitrun

import (
	"bufio"
	"os"
	"slices"
	"testing"
	"time"
)

// words reads what readControl delivers until the channel closes, or until quiet for 300 ms
// (the writer still open and nothing more to come).
func words(ch <-chan string) (got []string, closed bool) {
	for {
		select {
		case w, ok := <-ch:
			if !ok {
				return got, true
			}
			got = append(got, w)
		case <-time.After(300 * time.Millisecond):
			return got, false
		}
	}
}

// D7 with a preloaded spec: a go that conch withdrew (a stop, an abort or conch's end already
// in the pipe when the guardian reads go: it was stopped or slow) must not start the command.
// Real pipes, written before the reader starts, as a SIGSTOPped guardian finds them.
func TestReadControlDropsWithdrawnGo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		written string
		closeW  bool
		want    []string
		closed  bool
	}{
		{"go alone", "go\n", false, []string{"go"}, false},
		{"go, then stop", "go\nstop\n", false, []string{"stop"}, false},
		{"go, then abort", "go\nabort\n", false, []string{"abort"}, false},
		{"go, then conch gone (EOF)", "go\n", true, nil, true},
		{"go, then stop, then EOF", "go\nstop\n", true, []string{"stop"}, true},
		{"spec line, then go alone", "{}\ngo\n", false, []string{"{}", "go"}, false},
		{"stop alone", "stop\n", false, []string{"stop"}, false},
		{"go, then kill", "go\nkill\n", false, []string{"kill"}, false},
		{"deadline, go, deadline", "deadline 1 2\ngo\ndeadline 3 4\n", false, []string{"deadline 1 2", "deadline 3 4", "go"}, false},
		{"go, deadline, stop", "go\ndeadline 3 4\nstop\n", false, []string{"deadline 3 4", "stop"}, false},
		{"go, deadline, EOF", "go\ndeadline 3 4\n", true, []string{"deadline 3 4"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if _, err := w.WriteString(tc.written); err != nil {
				t.Fatal(err)
			}
			if tc.closeW {
				w.Close()
			} else {
				defer w.Close()
			}
			got, closed := words(readControl(bufio.NewReader(r), int(r.Fd())))
			if !slices.Equal(got, tc.want) || closed != tc.closed {
				t.Errorf("readControl of %q (writer closed: %v) = %q, closed %v; want %q, closed %v", tc.written, tc.closeW, got, closed, tc.want, tc.closed)
			}
		})
	}
}
