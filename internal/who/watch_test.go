package who

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdtest"
)

// A watch writing to a pipe whose reader is gone ends with ErrOutputClosed
// while nothing changes: the reader's end is noticed, not only the next
// write's EPIPE.
func TestWatchReaderGone(t *testing.T) {
	srv := etcdtest.Start(t)
	c := srv.Client(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	done := make(chan error, 1)
	go func() { done <- Watch(t.Context(), c, "rg", WatchOptions{Out: w}) }()
	buf := make([]byte, 1)
	if _, err := r.Read(buf); err != nil { // the first listing is written
		t.Fatal(err)
	}
	r.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrOutputClosed) {
			t.Fatalf("Watch: %v, want ErrOutputClosed", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Watch did not end after its reader left")
	}
}
