package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/conch-project/conch/internal/etcdtest"
	"github.com/conch-project/conch/sema/schema"
)

// BenchmarkWhoWatchDelay measures --who --watch's delay per change: from
// the return of a Put under the watched prefix to the stamp line of the
// block that shows it, read from conch's stdout (ns/op is that delay).
// followQuiet (30 ms) is in it by design: a change waits that long for
// others of its burst.
func BenchmarkWhoWatchDelay(b *testing.B) {
	srv := etcdtest.Start(b)
	c := srv.Client(b)
	cmd := exec.Command(conchBin, "sema", "bw", "--who", "--watch")
	cmd.Env = append(os.Environ(), "CONCH_ENDPOINTS="+srv.Endpoint, "CONCH_CONFIG=/dev/null")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	stamps := make(chan time.Time, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "--- ") {
				stamps <- time.Now()
			}
		}
		close(stamps)
	}()
	<-stamps // the first listing
	ctx := context.Background()
	var total time.Duration
	b.ResetTimer()
	for i := range b.N {
		key := fmt.Sprintf("%sk%d", schema.Prefix("bw", 1), i%2)
		op := func() error { _, err := c.Put(ctx, key, "{}"); return err }
		if i%4 >= 2 {
			op = func() error { _, err := c.Delete(ctx, key); return err }
		}
		if err := op(); err != nil {
			b.Fatal(err)
		}
		done := time.Now()
		select {
		case t, ok := <-stamps:
			if !ok {
				b.Fatal("--watch ended")
			}
			total += t.Sub(done)
		case <-time.After(10 * time.Second):
			b.Fatal("no block within 10 s of a change")
		}
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/change")
}
