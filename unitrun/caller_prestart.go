package unitrun

// This file runs in the caller's process (conch): a guardian kept started ahead of the slot.

import (
	"context"
	"sync"
)

// Prestarter keeps a guardian (D7) started ahead (Prepare) while the caller says it wants one
// (Want), so that the guardian's start-up (a fork and exec, several milliseconds) overlaps the
// caller's own round trips instead of following them; a caller that will wait long says it
// wants none, and holds no process meanwhile.
//
// The guardian is started and closed by one goroutine of the Prestarter, never on the caller's
// goroutines. Take stops that goroutine and hands the guardian over; Close ends everything;
// Reset starts over. A failed start is not reported: Run then starts its own guardian and says
// what fails.
//
// Once the caller names a key (Want with rev != 0) and has set a load function (PreloadWith),
// the guardian is also sent the command's whole spec for it (Prepared.Preload), so that
// starting the command costs one word to the guardian and its fork.
type Prestarter struct {
	spec Spec // what Prepare uses: the guardian's argv and stdio

	mu         sync.Mutex
	want       bool  // a guardian is wanted now
	rev, lease int64 // the key the caller names (0: none yet)
	load       func(rev, lease int64) Spec

	loaded int64 // the goroutine's: the rev whose spec p was preloaded with (0: none)

	kick     chan struct{} // cap 1: want changed
	quit     chan struct{} // closed by stop
	done     chan struct{} // closed when the goroutine has ended
	quitOnce sync.Once

	p *Prepared // the goroutine's until done; then Take's and Close's
}

// StartPrestarter starts a guardian for spec (its Guardian, Stdin, Stdout and Stderr; the
// rest is given to Prepared.Run) in the background, wanted until Want says otherwise, and
// returns at once. It starts one goroutine, which Take, Reset and Close stop.
func StartPrestarter(spec Spec) *Prestarter {
	ps := &Prestarter{spec: spec, kick: make(chan struct{}, 1)}
	ps.start()
	return ps
}

// start wants a guardian and starts the goroutine; the previous one, if any, has ended.
func (ps *Prestarter) start() {
	ps.mu.Lock()
	ps.want = true
	ps.mu.Unlock()
	ps.quit, ps.done, ps.quitOnce = make(chan struct{}), make(chan struct{}), sync.Once{}
	ps.wake()
	go ps.loop()
}

// Reset makes the Prestarter as new, for a next command after one that never started: it
// stops the goroutine, closes the guardian Take handed over (used up or not), and starts over
// with a fresh one and no key. Call it from the goroutine that calls Want.
func (ps *Prestarter) Reset() {
	ps.Close()
	ps.p, ps.loaded = nil, 0
	ps.mu.Lock()
	ps.rev, ps.lease = 0, 0
	ps.mu.Unlock()
	ps.start()
}

// Want records whether a guardian is wanted now, and for which key (rev, its fencing token,
// and lease; rev 0: none known yet), and wakes the goroutine: a guardian for another key is
// replaced. It does not block.
func (ps *Prestarter) Want(want bool, rev, lease int64) {
	ps.mu.Lock()
	ps.want, ps.rev, ps.lease = want, rev, lease
	ps.mu.Unlock()
	ps.wake()
}

// wake wakes the goroutine unless a wake-up is pending already (it reads the latest want).
func (ps *Prestarter) wake() {
	select {
	case ps.kick <- struct{}{}:
	default:
	}
}

// PreloadWith sets the function that returns the command's spec for the key created at rev
// with lease (what Run will be given); call it before the first Want that names a key.
func (ps *Prestarter) PreloadWith(load func(rev, lease int64) Spec) {
	ps.mu.Lock()
	ps.load = load
	ps.mu.Unlock()
}

// loop starts or closes the guardian as wanted until stop.
func (ps *Prestarter) loop() {
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
		ps.apply(want, rev)
		if want && rev != 0 && load != nil && ps.p != nil && ps.loaded == 0 {
			ps.loaded = rev // once per key: a failure is Run's to report
			_ = ps.p.Preload(context.Background(), load(rev, lease))
		}
	}
}

// apply starts or closes the guardian as want says; a guardian preloaded for another key than
// rev (a re-entry) is replaced.
func (ps *Prestarter) apply(want bool, rev int64) {
	if ps.p != nil && (!want || (ps.loaded != 0 && ps.loaded != rev)) {
		ps.p.Close()
		ps.p, ps.loaded = nil, 0
	}
	if want && ps.p == nil {
		if p, err := Prepare(ps.spec); err == nil {
			ps.p = p
		}
	}
}

// Take stops the goroutine (waiting for a start in progress) and returns the guardian, started
// now if none was ready; nil if it cannot be started (then Run reports why). The Prestarter
// still closes it in Close or Reset.
func (ps *Prestarter) Take() *Prepared {
	ps.stop()
	if ps.p == nil {
		if p, err := Prepare(ps.spec); err == nil {
			ps.p = p
		}
	}
	return ps.p
}

// Close stops the goroutine and closes the guardian, if any (Prepared.Close: one that never
// got a command is killed, one that ran it is joined). It blocks until the guardian is gone.
func (ps *Prestarter) Close() {
	ps.stop()
	if ps.p != nil {
		ps.p.Close()
	}
}

func (ps *Prestarter) stop() {
	ps.quitOnce.Do(func() { close(ps.quit) })
	<-ps.done
}
