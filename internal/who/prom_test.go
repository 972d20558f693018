package who

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	dto "github.com/prometheus/client_model/go"

	"github.com/conch-project/conch/internal/who/whotest"
	"github.com/conch-project/conch/sema/schema"
)

// The metrics of a scripted queue, parsed back: per semaphore capacity,
// holders, waiters, paused, oldest ages; HELP and TYPE for each family;
// hostile name segments in foreign keys come out as valid label values.
func TestRenderPrometheusScripted(t *testing.T) {
	now := time.Date(2026, 6, 12, 10, 0, 0, 0, time.UTC)
	rec := func(since time.Time) schema.ReadRecord { return schema.ReadRecord{Record: schema.Record{Since: since}} }
	counted := func(name string, max, rank int, since time.Time) Entry {
		return Entry{Name: name, Max: max, Info: schema.KeyInfo{Kind: schema.KeyLease, Max: max}, Rank: rank, Held: rank < max, Lease: 7, Record: rec(since)}
	}
	hostile := []string{`q"uote`, `back\slash`, "new\nline", "ünï😀", "bad\xffutf8"}
	l := Listing{Entries: []Entry{
		counted("enc", 2, 0, now.Add(-90*time.Second)),
		counted("enc", 2, 1, now.Add(-30*time.Second)),
		counted("enc", 2, 2, now.Add(-20*time.Second)),
		{Name: "enc", Max: 2, Info: schema.KeyInfo{Kind: schema.KeySpread, Max: 2}, Rank: -1, NodeWait: true, Lease: 8, Record: rec(now.Add(-40 * time.Second))},
		counted("lock", 1, 0, time.Time{}), // a record without since
		{Name: "boot", Max: 2, Info: schema.KeyInfo{Kind: schema.KeyLease, Max: 2}, Rank: 0, Held: true, HeldAfter: true, Lease: 9,
			TTL: schema.LeaseTTL{Known: true, Left: 100, Granted: 3600}}, // kept after its run: its lease runs out by design
		{Name: "boot", Max: 2, Info: schema.KeyInfo{Kind: schema.KeyLease, Max: 2}, Rank: 1, Held: true, Lease: 10,
			TTL: schema.LeaseTTL{Known: true, Left: 2, Granted: 10}}, // its conch died
	}, Pauses: []schema.Pause{{Name: "lock", Max: 1}, {Name: "idle", Max: 3}}}
	for _, n := range hostile {
		l.Entries = append(l.Entries, Entry{Name: n, Info: schema.KeyInfo{Kind: schema.KeyForeign}, Rank: -1})
	}
	out, err := renderPrometheus(l, now)
	if err != nil {
		t.Fatal(err)
	}
	fams := whotest.ParseProm(t, string(out))
	want := []struct {
		metric, name, max string
		v                 float64
	}{
		{"conch_sema_capacity", "enc", "2", 2}, {"conch_sema_holders", "enc", "2", 2}, {"conch_sema_waiters", "enc", "2", 2},
		{"conch_sema_oldest_holder_seconds", "enc", "2", 90}, {"conch_sema_oldest_waiter_seconds", "enc", "2", 40},
		{"conch_sema_paused", "enc", "2", 0}, {"conch_sema_held_after", "enc", "2", 0},
		{"conch_sema_holders", "lock", "1", 1}, {"conch_sema_paused", "lock", "1", 1}, {"conch_sema_oldest_holder_seconds", "lock", "1", 0},
		{"conch_sema_paused", "idle", "3", 1}, {"conch_sema_holders", "idle", "3", 0}, {"conch_sema_capacity", "idle", "3", 3},
		{"conch_sema_holders", "boot", "2", 2}, {"conch_sema_held_after", "boot", "2", 1}, {"conch_sema_expiring_holders", "boot", "2", 1},
	}
	for _, w := range want {
		if got := whotest.PromValue(fams, w.metric, "name", w.name, "max", w.max); got != w.v {
			t.Errorf("%s{name=%q,max=%q} = %v, want %v", w.metric, w.name, w.max, got, w.v)
		}
	}
	for _, g := range semaGauges {
		if mf := fams[g.name]; mf == nil || mf.GetHelp() == "" || mf.GetType() != dto.MetricType_GAUGE || len(mf.Metric) != 4 {
			t.Errorf("family %s: %v", g.name, mf)
		}
	}
	for _, n := range hostile {
		if got := whotest.PromValue(fams, "conch_sema_foreign_keys", "name", labelValue(n)); got != 1 {
			t.Errorf("foreign keys of %q: %v\n%s", n, got, out)
		}
	}
	if mf := fams["conch_sema_foreign_keys"]; mf == nil || len(mf.Metric) != len(hostile) { // conch's keys, on their leases, are not
		t.Errorf("foreign keys family %v; want one sample per hostile name", mf)
	}
	if !strings.Contains(string(out), "# HELP conch_sema_holders ") || !strings.Contains(string(out), "# TYPE conch_sema_holders gauge") {
		t.Fatalf("no HELP/TYPE lines:\n%s", out)
	}
}

// WriteFile replaces a regular file or creates one, and leaves a symbolic link, a FIFO or a
// folder as it is: a rename over /dev/null or /dev/stdout would replace them by a plain file.
func TestWriteFileOnlyRegular(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "conch.prom")
	for range 2 { // created, then replaced
		if err := WriteFile(regular, []byte("x 1\n")); err != nil {
			t.Fatalf("regular file: %v", err)
		}
	}
	fifo, link, sub := filepath.Join(dir, "fifo"), filepath.Join(dir, "link"), filepath.Join(dir, "sub")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(regular, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for path, kind := range map[string]fs.FileMode{fifo: fs.ModeNamedPipe, link: fs.ModeSymlink, sub: fs.ModeDir} {
		err := WriteFile(path, []byte("x 1\n"))
		fi, lerr := os.Lstat(path)
		if !errors.Is(err, ErrNotRegular) || lerr != nil || fi.Mode().Type() != kind {
			t.Errorf("%s: error %v, now %v (%v); want ErrNotRegular and the %v left as it was", path, err, fi.Mode(), lerr, kind)
		}
	}
	// the refusals as the operator reads them (a device is a device, whichever kind)
	for path, kind := range map[string]string{fifo: "FIFO", link: "symbolic link", sub: "directory", "/dev/null": "device"} {
		want := path + " is a " + kind + ", not a regular file; it is left untouched"
		if err := WriteFile(path, []byte("x 1\n")); err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %q", path, err, want)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
