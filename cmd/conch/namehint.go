package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/conch-project/conch/internal/who"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A name one letter off a live one is likely a typo: `conch sema batch-wroker --pause` would
// pause nothing. When the name given has no keys and no pause, and a live name is within one
// edit of it, conch says so ("did you mean"); the command still does what it was asked.

// nameHintTimeout bounds the reads of a hint (two for the name's own keys, one or a few to
// list the live names): a hint that cannot be had in time is not given.
const nameHintTimeout = time.Second

// maxHinted is how many near names a hint lists at most.
const maxHinted = 3

// nearNames returns the names of live within one edit (insertion, deletion or substitution of
// one byte, or two neighbours swapped: typoDistance) of name, name itself excluded, in
// live's order, at most maxHinted. An edit of a digit does not count (numberedSiblings):
// shard-1 beside shard-2, or job beside job2, are names given on purpose, not typos.
func nearNames(name string, live []string) []string {
	var near []string
	for _, l := range live {
		if l != name && typoDistance(name, l) == 1 && !numberedSiblings(name, l) && len(near) < maxHinted {
			near = append(near, l)
		}
	}
	return near
}

// numberedSiblings reports whether a and b differ only in digits: past their common prefix
// and common suffix, what is left of either holds a digit (db1 and db2, ha-job and ha-job2).
func numberedSiblings(a, b string) bool {
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	q := 0
	for q < len(a)-p && q < len(b)-p && a[len(a)-1-q] == b[len(b)-1-q] {
		q++
	}
	return strings.ContainsAny(a[p:len(a)-q]+b[p:len(b)-q], "0123456789")
}

// typoDistance is the optimal string alignment distance of a and b (bytes): Levenshtein's,
// with two neighbouring bytes swapped counted as one edit ("wroker" is one typo from
// "worker", not two). Flag hints and name hints both use it.
func typoDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// nameHint returns "did you mean X?" (or "X or Y") when name has no key, pause or marker while
// a live name is within one edit of it (who.NameSurvey: one request while the names fit a
// page, nearNames), else "".
// Its reads are bounded by ctx and nameHintTimeout; a failed read gives "" (no hint).
func nameHint(ctx context.Context, cl *clientv3.Client, name string, self schema.Record) string {
	ctx, cancel := context.WithTimeout(ctx, nameHintTimeout)
	defer cancel()
	inUse, live, err := who.NameSurvey(ctx, cl, name, self)
	if err != nil || inUse {
		return ""
	}
	near := nearNames(name, live)
	if len(near) == 0 {
		return ""
	}
	quoted := make([]string, len(near))
	for i, n := range near {
		quoted[i] = fmt.Sprintf("%q", n)
	}
	return "did you mean " + strings.Join(quoted, " or ") + "?"
}

// hintNote is nameHint as the end of a line: "; no such semaphore: did you mean X?", or "".
func hintNote(ctx context.Context, cl *clientv3.Client, name string) string {
	if hint := nameHint(ctx, cl, name, schema.Record{}); hint != "" {
		return "; no such semaphore: " + hint
	}
	return ""
}

// runNameHint gives nameHint for a run, beside it: once the run's enqueue is answered
// (enqueued), and only when that enqueue saw no other key under the name (a name in use needs
// no hint, and a contended run pays no read for it), the reads run on a goroutine of their own
// that writes the hint as a warning, so they cost the run no time. join waits for that
// goroutine (bounded by nameHintTimeout): call it before the run's last line (the client is
// still open then) and after the run. The run's own key does not make its name in use: its
// record names this host and process (self).
type runNameHint struct {
	rep  *reporter
	name string
	self schema.Record // the run's own record: its key is not the name in use

	mu      sync.Mutex
	ctx     context.Context  // the connection's, without its cancellation
	cl      *clientv3.Client // the run's client, once connected
	decided bool             // the first enqueue was answered: the reads started or were not needed
	done    chan struct{}    // closed when the goroutine is over; nil when it never started
}

// wrap returns connect, keeping the client for the hint's reads.
func (h *runNameHint) wrap(connect func(context.Context) (*clientv3.Client, error)) func(context.Context) (*clientv3.Client, error) {
	return func(ctx context.Context) (*clientv3.Client, error) {
		cl, err := connect(ctx)
		if err == nil {
			h.mu.Lock()
			h.ctx, h.cl = context.WithoutCancel(ctx), cl
			h.mu.Unlock()
		}
		return cl, err
	}
}

// enqueued starts the hint's reads after the run's first answered enqueue e, when it saw no
// other key under the name: none ranked before ours (e.Ahead 0) and none under another
// capacity.
func (h *runNameHint) enqueued(e sema.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.decided || h.cl == nil {
		return
	}
	h.decided = true
	if e.Ahead != 0 || e.OtherCapacities != 0 {
		return
	}
	h.done = make(chan struct{})
	go func(ctx context.Context, cl *clientv3.Client) {
		defer close(h.done)
		if hint := nameHint(ctx, cl, h.name, h.self); hint != "" {
			h.rep.warnf("WARNING: nothing is queued under %q and no pause names it: %s (running it as named)", h.name, hint)
		}
	}(h.ctx, h.cl)
}

// join waits for the hint's goroutine, if it started.
func (h *runNameHint) join() {
	if h == nil {
		return
	}
	h.mu.Lock()
	done := h.done
	h.mu.Unlock()
	if done != nil {
		<-done
	}
}
