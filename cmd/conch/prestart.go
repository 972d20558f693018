package main

import (
	"context"
	"sync"

	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/unitrun"
)

// prestarter keeps a guardian (D7) started ahead of the slot (unitrun.Prepare) while conch
// is not going to wait long, so that the guardian's start-up (the re-execution of conch,
// several milliseconds) overlaps the etcd round trips instead of following them: from before
// the enqueue until the semaphore says we wait behind others, and again from the moment we
// are next in line. A conch that waits in a long queue has no guardian, so it stays small.
//
// The guardian is started and closed by one goroutine of the prestarter, never on Acquire's
// goroutine: a fork and exec there would delay the creation of the watches that wake us.
// take stops that goroutine; close ends everything; reset starts over for the next holding
// (its owner, the run, keeps one prestarter for all its holdings). A failed start is not
// reported: Run then starts its own guardian and says what fails.
//
// Once our key is written and we are next in line (or hold already), the guardian is also
// sent the command's whole spec for that key (unitrun.Prepared.Preload, with load's spec), so
// that when the slot comes the hand-off's critical path is one word to the guardian and its
// fork: the fencing token of the env is the key's create revision, known from the
// enqueue on.
type prestarter struct {
	spec unitrun.Spec // what unitrun.Prepare uses: the guardian's argv and stdio

	mu         sync.Mutex
	want       bool  // a guardian is wanted now
	rev, lease int64 // our key's create revision and lease, once written (0: not yet)
	// load returns the command's spec for the key created at rev with lease (what Run will be
	// given); nil means no preload (preloadWith).
	load func(rev, lease int64) unitrun.Spec

	loaded int64 // the goroutine's: the rev whose spec p was preloaded with (0: none)

	kick     chan struct{} // cap 1: want changed
	quit     chan struct{} // closed by take
	done     chan struct{} // closed when the goroutine has ended
	quitOnce sync.Once

	p *unitrun.Prepared // the goroutine's until done; then take's and close's
}

// startPrestarter starts a guardian for spec (its Guardian, Stdin, Stdout and Stderr; the
// rest is given to Prepared.Run) in the background and returns at once.
func startPrestarter(spec unitrun.Spec) *prestarter {
	ps := &prestarter{spec: spec, kick: make(chan struct{}, 1)}
	ps.start()
	return ps
}

// start wants a guardian and starts the goroutine; the previous one, if any, has ended.
func (ps *prestarter) start() {
	ps.mu.Lock()
	ps.want = true
	ps.mu.Unlock()
	ps.quit, ps.done, ps.quitOnce = make(chan struct{}), make(chan struct{}), sync.Once{}
	select {
	case ps.kick <- struct{}{}:
	default: // a wake-up is pending already
	}
	go ps.loop()
}

// reset makes the prestarter as new after a holding whose command never started (the slot
// was lost first, and conch queues again): it stops the goroutine, closes the guardian the
// holding took (used up or not), and starts over with a fresh one. It is called by the
// prestarter's owner, on the goroutine that calls onEvent (Acquire's), between holdings.
func (ps *prestarter) reset() {
	ps.close()
	ps.p, ps.loaded = nil, 0
	ps.mu.Lock()
	ps.rev, ps.lease = 0, 0
	ps.mu.Unlock()
	ps.start()
}

// onEvent is called with every queue event (sema.Options.OnEvent): waiting behind others
// closes the guardian, being next in line starts one.
func (ps *prestarter) onEvent(e sema.Event) {
	switch e.Kind {
	case sema.Enqueued: // held at once, or about to wait: the key is known either way
		ps.set(true, e.Rev, int64(e.Lease))
	case sema.Waiting: // with NodeBusy (D11) there is no key of ours yet: Rev is 0
		ps.set(e.Ahead == 0, e.Rev, int64(e.Lease))
	}
}

// set records whether a guardian is wanted, and for which key (rev 0: none yet), and wakes
// the goroutine; it does not block.
func (ps *prestarter) set(want bool, rev, lease int64) {
	ps.mu.Lock()
	ps.want, ps.rev, ps.lease = want, rev, lease
	ps.mu.Unlock()
	select {
	case ps.kick <- struct{}{}:
	default: // a wake-up is pending: it reads the latest want
	}
}

// loop starts or closes the guardian as wanted until take.
func (ps *prestarter) loop() {
	defer close(ps.done)
	for {
		select {
		case <-ps.quit:
			return
		case <-ps.kick:
		}
		ps.mu.Lock()
		want, rev, lease, load := ps.want, ps.rev, ps.lease, ps.load
		ps.mu.Unlock()
		switch {
		case want && ps.p != nil && ps.loaded != 0 && ps.loaded != rev: // a new key (re-entry)
			ps.p.Close()
			ps.p, ps.loaded = nil, 0
			fallthrough
		case want && ps.p == nil:
			if p, err := unitrun.Prepare(ps.spec); err == nil {
				ps.p = p
			}
		case !want && ps.p != nil:
			ps.p.Close()
			ps.p, ps.loaded = nil, 0
		}
		if want && rev != 0 && load != nil && ps.p != nil && ps.loaded == 0 {
			ps.preload(load, rev, lease)
		}
	}
}

// preload sends the guardian the command's spec for the key at rev (load's, unitrun
// Preload); the loop calls it once per key. A failure is not reported: Run then sends the spec
// itself, or starts afresh, and says what fails.
func (ps *prestarter) preload(load func(rev, lease int64) unitrun.Spec, rev, lease int64) {
	ps.loaded = rev
	_ = ps.p.Preload(context.Background(), load(rev, lease))
}

// preloadWith sets the prestarter's load (see the field); call it before the first queue
// event.
func (ps *prestarter) preloadWith(load func(rev, lease int64) unitrun.Spec) {
	ps.mu.Lock()
	ps.load = load
	ps.mu.Unlock()
}

// take stops the goroutine (waiting for a start in progress) and returns the guardian for the
// slot now held, started now if none was ready; nil if it cannot be started (then
// unitrun.Run reports why). The prestarter still closes it in close.
func (ps *prestarter) take() *unitrun.Prepared {
	ps.stop()
	if ps.p == nil {
		if p, err := unitrun.Prepare(ps.spec); err == nil {
			ps.p = p
		}
	}
	return ps.p
}

// close stops the goroutine and closes the guardian, if any: a guardian that never got a
// command is killed, one that ran the command is joined (it is exiting, D7). It blocks until
// the guardian is gone.
func (ps *prestarter) close() {
	ps.stop()
	if ps.p != nil {
		ps.p.Close()
	}
}

func (ps *prestarter) stop() {
	ps.quitOnce.Do(func() { close(ps.quit) })
	<-ps.done
}
