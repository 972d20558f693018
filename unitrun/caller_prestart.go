package unitrun

// This file runs in the caller's process (conch): the way in that keeps a guardian started
// ahead of the slot.

import (
	"context"
	"sync"
)

// Prestarter runs a Plan's command with a guardian (D7) started ahead: the way in for a caller
// that prepares while it waits (Plan.Prestart). It keeps the guardian started while the caller
// says it wants one (Want), so that the guardian's start-up (a fork and exec, several
// milliseconds) overlaps the caller's own round trips instead of following them; a caller that
// will wait long says it wants none, and holds no process meanwhile.
//
// The guardian is started and closed by one goroutine of the Prestarter, never on the caller's
// goroutines. Run stops that goroutine and runs the command with the guardian; Close ends
// everything; Reset starts over. A failed start is not reported: Run then starts its own
// guardian and says what fails.
//
// Once the caller names a key (Want with rev != 0) and has set a load function (PreloadWith),
// the guardian is also sent the command's whole spec for it, scoped as the Plan says, so that
// starting the command costs one word to the guardian and its fork; in scope mode without a
// runtime limit its scope is made ahead too, described as waiting for the slot (D8b).
type Prestarter struct {
	plan *Plan
	spec Spec // what prepare uses: the guardian's argv and stdio

	mu         sync.Mutex
	want       bool  // a guardian is wanted now
	rev, lease int64 // the key the caller names (0: none yet)
	load       func(rev, lease int64) (Spec, ScopeUnit)

	loaded int64 // the goroutine's: the rev whose spec p was preloaded with (0: none)

	kick     chan struct{} // cap 1: want changed
	quit     chan struct{} // closed by stop
	done     chan struct{} // closed when the goroutine has ended
	quitOnce sync.Once

	p *prepared // the goroutine's until done; then Run's and Close's
}

// Prestart starts a guardian for the plan's commands with stdio's Guardian, Stdin, Stdout and
// Stderr (the rest of the spec is given to Run) in the background, wanted until Want says
// otherwise, and returns at once. It starts one goroutine, which Run, Reset and Close stop.
// The Prestarter must be closed before the Plan.
func (p *Plan) Prestart(stdio Spec) *Prestarter {
	ps := &Prestarter{plan: p, spec: stdio, kick: make(chan struct{}, 1)}
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
// stops the goroutine, closes the guardian Run was given (used up or not), and starts over
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

// PreloadWith sets the function that returns the command's spec and scope unit for the key
// created at rev with lease (what Run will be given); call it before the first Want that names
// a key. It is called on the Prestarter's goroutine, once the Plan is decided.
func (ps *Prestarter) PreloadWith(load func(rev, lease int64) (Spec, ScopeUnit)) {
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
			_ = ps.p.preload(context.Background(), ps.plan.scoped(load(rev, lease)))
		}
	}
}

// apply starts or closes the guardian as want says; a guardian preloaded for another key than
// rev (a re-entry) is replaced.
func (ps *Prestarter) apply(want bool, rev int64) {
	if ps.p != nil && (!want || (ps.loaded != 0 && ps.loaded != rev)) {
		ps.p.close()
		ps.p, ps.loaded = nil, 0
	}
	if want && ps.p == nil {
		if p, err := prepare(ps.spec); err == nil {
			ps.p = p
		}
	}
}

// Run runs spec as the Plan says (Plan.Run: the blocking, ctx, scope, fallback, Result and
// errors are the same) with the guardian started ahead, which was preloaded with spec if it
// comes out the same. It stops the goroutine first (waiting for a start in progress); a
// guardian that was not ready is started now. Call it once per Reset; the Prestarter still
// closes the guardian in Close or Reset.
func (ps *Prestarter) Run(ctx context.Context, spec Spec, unit ScopeUnit, warn func(error)) (Result, error) {
	return ps.plan.run(ctx, ps.take(), spec, unit, warn)
}

// take stops the goroutine (waiting for a start in progress) and returns the guardian, started
// now if none was ready; nil if it cannot be started (then run reports why).
func (ps *Prestarter) take() *prepared {
	ps.stop()
	if ps.p == nil {
		if p, err := prepare(ps.spec); err == nil {
			ps.p = p
		}
	}
	return ps.p
}

// Close stops the goroutine and closes the guardian, if any (one that never got a command is
// killed, one that ran it is joined). It blocks until the guardian is gone.
func (ps *Prestarter) Close() {
	ps.stop()
	if ps.p != nil {
		ps.p.close()
	}
}

func (ps *Prestarter) stop() {
	ps.quitOnce.Do(func() { close(ps.quit) })
	<-ps.done
}
