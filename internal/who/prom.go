package who

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/conch-project/conch/internal/filekind"
	"github.com/conch-project/conch/sema/schema"
)

// semaGauge is one per-semaphore metric of the Prometheus form, labelled
// name and max.
type semaGauge struct {
	name, help string
	value      func(s summary, now time.Time) float64
}

// semaGauges are the metrics of each semaphore, in the order written. The
// names and meanings are an interface: dashboards and alerts use them.
var semaGauges = []semaGauge{
	{"conch_sema_capacity", "Capacity of the semaphore (--max): at most this many holders.",
		func(s summary, _ time.Time) float64 { return float64(s.Max) }},
	{"conch_sema_holders", "Keys holding a slot (rank below the capacity), slots held after a run included.",
		func(s summary, _ time.Time) float64 { return float64(s.Holders) }},
	{"conch_sema_waiters", "Processes waiting for a slot, --spread ones waiting for their node's key included.",
		func(s summary, _ time.Time) float64 { return float64(s.Waiters) }},
	{"conch_sema_held_after", "Slots kept after their run ended (--hold-after).",
		func(s summary, _ time.Time) float64 { return float64(s.HeldAfter) }},
	{"conch_sema_expiring_holders", "Holders whose lease is not being kept alive (their conch died, is stalled or cut off).",
		func(s summary, _ time.Time) float64 { return float64(s.Expiring) }},
	{"conch_sema_paused", "1 while the semaphore is paused (no new holder starts), else 0.",
		func(s summary, _ time.Time) float64 { return boolFloat(s.Paused) }},
	{"conch_sema_oldest_holder_seconds", "Seconds since the longest-running holder got its slot; 0 with no holder.",
		func(s summary, now time.Time) float64 { return ageSeconds(s.OldestHolder, now) }},
	{"conch_sema_oldest_waiter_seconds", "Seconds since the longest waiter joined the queue; 0 with no waiter.",
		func(s summary, now time.Time) float64 { return ageSeconds(s.OldestWaiter, now) }},
}

const onceHelp = "Unix time at which the last successful run of --once-per ended, while its period's marker lives (one period after it); absent when no run succeeded in the last period."

// onceFamily is conch_sema_once_last_success_timestamp_seconds, one sample per readable
// period marker of a semaphore (D15); nil when there is none.
func onceFamily(once []schema.Marker) *dto.MetricFamily {
	mf := gaugeFamily("conch_sema_once_last_success_timestamp_seconds", onceHelp)
	for _, m := range once {
		if m.Err == nil && m.Max != 0 {
			mf.Metric = append(mf.Metric, gauge(float64(m.End.Unix()), "name", labelValue(m.Name), "max", strconv.Itoa(m.Max)))
		}
	}
	if len(mf.Metric) == 0 {
		return nil
	}
	return mf
}

const foreignKeysHelp = "Keys under conch's prefixes that conch did not write (by hand or by another program): in no semaphore, in a queue under a name conch never writes, or bound to no lease (the last two take a slot; a key with no lease until deleted); per name segment as stored."

// renderPrometheus returns the Prometheus text exposition (version 0.0.4)
// of the listing l at time now: every metric of semaGauges per semaphore
// (labels name and max), and conch_sema_foreign_keys per name segment that
// holds keys conch did not write (foreignKeys); empty when there is none of either. The text is written by prometheus/common's
// encoder, which escapes label values; names read from etcd that are not
// valid UTF-8 have their bad bytes replaced (U+FFFD), as label values must
// be UTF-8. Its error is the encoder's (none is expected).
func renderPrometheus(l Listing, now time.Time) ([]byte, error) {
	sums := summarize(l)
	var fams []*dto.MetricFamily
	for _, g := range semaGauges {
		if len(sums) == 0 { // the encoder refuses a family without samples
			break
		}
		mf := gaugeFamily(g.name, g.help)
		for _, s := range sums {
			mf.Metric = append(mf.Metric, gauge(g.value(s, now), "name", labelValue(s.Name), "max", strconv.Itoa(s.Max)))
		}
		fams = append(fams, mf)
	}
	if once := onceFamily(l.Once); once != nil {
		fams = append(fams, once)
	}
	foreign := foreignKeys(l)
	if len(foreign) > 0 {
		mf := gaugeFamily("conch_sema_foreign_keys", foreignKeysHelp)
		byLabel := map[string]int{} // one series per label value, whatever the names spelled the same
		for n, count := range foreign {
			byLabel[labelValue(n)] += count
		}
		for _, n := range sortedKeys(byLabel) {
			mf.Metric = append(mf.Metric, gauge(float64(byLabel[n]), "name", n))
		}
		fams = append(fams, mf)
	}
	var b bytes.Buffer
	for _, mf := range fams {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

// labelValue is s as a label value must be: UTF-8, each invalid byte spelled \xNN (as Go's
// %q does; the encoder escapes the rest), so that two names differing only in invalid bytes
// stay two label values (U+FFFD for every such byte made them one: duplicate series, which
// Prometheus refuses).
func labelValue(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			fmt.Fprintf(&b, `\x%02x`, s[i])
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// gaugeFamily is an empty gauge family named name, with its help text. (Its fields are
// pointers: new takes their values, so no protobuf helper is needed.)
func gaugeFamily(name, help string) *dto.MetricFamily {
	return &dto.MetricFamily{Name: new(name), Help: new(help), Type: dto.MetricType_GAUGE.Enum()}
}

// gauge is one sample of value with the label pairs kv (name, value, ...).
func gauge(value float64, kv ...string) *dto.Metric {
	m := &dto.Metric{Gauge: &dto.Gauge{Value: new(value)}}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Label = append(m.Label, &dto.LabelPair{Name: new(kv[i]), Value: new(kv[i+1])})
	}
	return m
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ageSeconds is the whole seconds from t to now, 0 for a zero t (none) or
// a t in the future (another node's clock ahead of ours).
func ageSeconds(t, now time.Time) float64 {
	if t.IsZero() || t.After(now) {
		return 0
	}
	return float64(now.Sub(t) / time.Second)
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// WriteFile writes b to path for node_exporter's textfile collector:
// to a temporary file in the same folder (whose name does not end in
// .prom, so the collector never reads it half-written), flushed to disk,
// mode 0644, then renamed over path. path must be a regular file or not
// exist: a rename would replace a device (/dev/null), a symbolic link
// (/dev/stdout) or a FIFO by a plain file, so WriteFile refuses them with
// an error wrapping ErrNotRegular and writes nothing. The temporary file is
// removed on failure. Other errors are the file system's.
func WriteFile(path string, b []byte) error {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		kind := filekind.Of(fi.Mode())
		if fi.Mode()&fs.ModeDevice != 0 {
			kind = "device" // either kind: this refusal never told them apart
		}
		return fmt.Errorf("%s is a %s, %w; it is left untouched", path, kind, ErrNotRegular)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// ErrNotRegular is WriteFile's refusal of a path that exists and is not a
// regular file.
var ErrNotRegular = errors.New("not a regular file")
