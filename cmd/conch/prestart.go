package main

import (
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
type prestarter struct {
	spec unitrun.Spec // what unitrun.Prepare uses: the guardian's argv and stdio

	mu   sync.Mutex
	want bool // a guardian is wanted now

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
	ps.p = nil
	ps.start()
}

// onEvent is called with every queue event (sema.Options.OnEvent): waiting behind others
// closes the guardian, being next in line starts one.
func (ps *prestarter) onEvent(e sema.Event) {
	if e.Kind == sema.Waiting {
		ps.set(e.Ahead == 0)
	}
}

// set records whether a guardian is wanted and wakes the goroutine; it does not block.
func (ps *prestarter) set(want bool) {
	ps.mu.Lock()
	ps.want = want
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
		want := ps.want
		ps.mu.Unlock()
		switch {
		case want && ps.p == nil:
			if p, err := unitrun.Prepare(ps.spec); err == nil {
				ps.p = p
			}
		case !want && ps.p != nil:
			ps.p.Close()
			ps.p = nil
		}
	}
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
