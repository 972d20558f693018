package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/conch-project/conch/internal/who"
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
// live's order, at most maxHinted.
func nearNames(name string, live []string) []string {
	var near []string
	for _, l := range live {
		if l != name && typoDistance(name, l) == 1 && len(near) < maxHinted {
			near = append(near, l)
		}
	}
	return near
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

// runNameHint gives nameHint for a run, beside it: the reads start as soon as the run has its
// etcd client (wrap), on a goroutine of their own that writes the hint as a warning, so they
// cost the run no time and the hint comes as the run starts. join waits for that goroutine
// (bounded by nameHintTimeout): call it before the run's last line (the client is still open
// then) and after the run. The run's own key does not make its name in use, whether its
// enqueue lands before the reads or after: its record names this host and process (self).
type runNameHint struct {
	rep  *reporter
	name string
	self schema.Record // the run's own record: its key is not the name in use
	done chan struct{} // closed when the goroutine is over; nil until the client is there
}

// wrap returns connect, starting the hint's goroutine once it has a client.
func (h *runNameHint) wrap(connect func(context.Context) (*clientv3.Client, error)) func(context.Context) (*clientv3.Client, error) {
	return func(ctx context.Context) (*clientv3.Client, error) {
		cl, err := connect(ctx)
		if err == nil && h.done == nil {
			h.done = make(chan struct{})
			go func() {
				defer close(h.done)
				if hint := nameHint(context.WithoutCancel(ctx), cl, h.name, h.self); hint != "" {
					h.rep.warnf("WARNING: nothing is queued under %q and no pause names it: %s (running it as named)", h.name, hint)
				}
			}()
		}
		return cl, err
	}
}

// join waits for the hint's goroutine, if it started.
func (h *runNameHint) join() {
	if h != nil && h.done != nil {
		<-h.done
	}
}
