package unitrun

// This file runs in the caller's process (conch): Run and prepared, the package's entry
// points for running a command under a guardian. Files named caller_*.go hold the rest of
// conch's side of the guardian pipe, guardian_*.go the guardian process's side.

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// run runs spec, its stop timing and scope set by Plan.scoped, with a guardian of its own:
// prepare, prepared.run and prepared.close in one call (Plan.Run says what it does).
func run(ctx context.Context, spec Spec) (Result, error) {
	if err := spec.check(); err != nil {
		return Result{}, err
	}
	if ctx.Err() != nil {
		return Result{}, notStarted(spec.Path, context.Cause(ctx))
	}
	p, err := prepare(spec)
	if err != nil {
		return Result{}, err
	}
	defer p.close()
	return p.run(ctx, spec)
}

// prepared is a guardian (D7) started by prepare ahead of its command: a process that has
// done its start-up and waits, blocked, for Run or Close. It is not safe for concurrent use.
type prepared struct {
	g        *guardianProc
	start    Spec      // Guardian, Stdin, Stdout and Stderr as prepare was given them
	guardian []string  // the guardian's argv in use: start.Guardian, or reexecGuardian (D7a)
	used     bool      // Run was called
	trusted  bool      // g said hello with this build's build ID, or needs no check (D7a)
	sent     bool      // g was sent a spec (by preload), or a send to it was attempted
	loaded   []byte    // the spec line preload sent g, nil if none
	scope    *scopeRun // the scope preload made for g, which waits in it, ready (D8b); nil if none
}

// prepare starts the guardian of a command that prepared.run will start later, so that the
// guardian's start-up (milliseconds; several more when this program is re-executed) overlaps
// whatever the caller does meanwhile, such as acquiring the slot. It uses only spec's
// Guardian, Stdin, Stdout and Stderr, which the guardian gets at its start; everything else,
// the command included, is given to Run. It does not block beyond the guardian's fork and exec
// (the guardian program's build is checked by Run, D7a). A guardian program that cannot be
// started is replaced by this program re-executed.
//
// The guardian waits without running anything; it exits when Close is called, when the
// caller's process dies, even by SIGKILL (its parent-death signal, or the EOF of its control
// pipe), or after Run. The result must be closed, also after Run (Close then joins the
// guardian, which Run may leave exiting). Errors wrap ErrGuardian.
//
// prepare starts the guardian's locked forking thread and its status-pipe reader; Close ends
// both.
func prepare(spec Spec) (*prepared, error) {
	spec = spec.withDefaults()
	p := &prepared{start: spec, guardian: spec.Guardian}
	g, err := startGuardian(spec)
	if err != nil && needsBuildCheck(p.guardian) { // D7a: the guardian program failed, re-exec
		p.guardian = reexecGuardian
		g, err = p.startGuardian()
	}
	if err != nil {
		return nil, err
	}
	p.g = g
	return p, nil
}

// startGuardian starts a fresh guardian as p's is (p.guardian).
func (p *prepared) startGuardian() (*guardianProc, error) {
	s := p.start
	s.Guardian = p.guardian
	return startGuardian(s)
}

// helloTimeout bounds the wait for the guardian program's hello (D7a), counted from the
// guardian's start. The program says it first, about a millisecond after its start; one silent
// for this long is not a guardian of this build (a hostile test put a `sleep 100` script there
// and conch held its slot forever), so it is closed and conch re-executes itself. Generous: on
// a loaded machine a start may take seconds (200 conch processes starting at once on 2 cores),
// and giving up on a slow but sound program then only adds a slower start to the delay.
const helloTimeout = 5 * time.Second

// trust makes sure that p's guardian speaks this build's protocol before it is sent anything
// (D7a): the guardian program beside conch must say hello with this build's build ID; if it
// says anything else, dies first, or says nothing within helloTimeout of its start, it is
// closed and replaced by this program re-executed (reexecGuardian), which needs no check, and
// warn (if set) is told why. It waits for the hello at most until ctx ends (the guardian's
// start-up, about a millisecond, has usually passed since prepare). Errors wrap ErrGuardian
// (no fallback could be started) or are ctx's cause.
func (p *prepared) trust(ctx context.Context, warn func(string)) error {
	if p.trusted || !needsBuildCheck(p.guardian) {
		p.trusted = true
		return nil
	}
	why := ""
	timer := time.NewTimer(time.Until(p.g.began.Add(helloTimeout)))
	defer timer.Stop()
	select {
	case ev, ok := <-p.g.events:
		switch {
		case ok && ev.Event == evHello && ev.Build == thisBuild():
			p.trusted = true
			return nil
		case !ok:
			why = "exited before its hello"
		default:
			why = fmt.Sprintf("is of another build (said %q, build %q)", ev.Event, ev.Build)
		}
	case <-timer.C: // a program that never speaks: not ours (D7a)
		why = fmt.Sprintf("said nothing within %v of its start", helloTimeout)
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	if warn != nil {
		warn(fmt.Sprintf("guardian program %s %s; using this program re-executed instead", p.guardian[0], why))
	}
	_ = p.g.close()
	p.guardian = reexecGuardian
	g, err := p.startGuardian()
	if err != nil {
		return err
	}
	p.g, p.trusted = g, true
	return nil
}

// run runs the command of spec with the prepared guardian, exactly as Plan.Run does (see
// there for the blocking, ctx, Result and errors), except that it returns as soon as
// the guardian reports that the command and everything it left running are gone, without
// waiting for the guardian's own exit: Close joins that. So the caller can act on the result
// (release the slot, D7) while the guardian exits.
//
// spec is the whole Spec; its Guardian, Stdin, Stdout and Stderr must be those given to
// prepare (the guardian already has them), else Run does not start the command and returns an
// error wrapping ErrGuardian. Run may be called once; a second call, or a call after Close,
// returns an error wrapping ErrGuardian. Nothing about the command is decided before Run: the
// environment, the scope (D8), the terminal's foreground (D5) are all taken from spec here;
// when preload sent the guardian a spec that comes out the same, Run only tells it to go
// (otherwise a fresh guardian gets Run's spec). A guardian found dead when Run is called
// (killed while it waited) is replaced by a fresh one; one that dies after that gives
// ErrGuardian, as in Plan.Run.
func (p *prepared) run(ctx context.Context, spec Spec) (Result, error) {
	if p.used || p.g.closed {
		return Result{}, fmt.Errorf("%s: not started: %w: prepared guardian already used", spec.Path, ErrGuardian)
	}
	p.used = true
	if err := spec.check(); err != nil {
		_ = p.g.close()
		return Result{}, err
	}
	spec = spec.withDefaults()
	if !p.start.sameStart(spec) {
		_ = p.g.close()
		return Result{}, fmt.Errorf("%s: not started: %w: guardian prepared with another Guardian, Stdin, Stdout or Stderr", spec.Path, ErrGuardian)
	}
	if ctx.Err() != nil {
		_ = p.g.close()
		return Result{}, notStarted(spec.Path, context.Cause(ctx))
	}
	r := &runner{spec: spec, g: nil, mode: newRunMode(spec)}
	fg := inForeground(spec.Stdin)
	line, err := specLine(spec, fg, r.mode.wire())
	if err == nil {
		err = p.takeScope(spec)
	}
	if err == nil {
		err = p.load(ctx, spec.Warn, line)
	}
	if err != nil {
		_ = p.g.close()
		return Result{}, fmt.Errorf("%s: not started: %w", spec.Path, err)
	}
	if p.scope != nil { // load kept the preloaded guardian, which waits in its scope (D8b)
		p.scope.Conn = spec.scope.Conn
		r.mode, r.ready = p.scope, true
	}
	r.g = p.g
	res, err := r.run(ctx)
	if errors.Is(err, errNotReady) || errors.Is(err, errGoUnanswered) && r.mode.wire() == nil {
		// D7b: the guardian was not ready, or did not answer go, in time and was killed; the
		// command did not start under it. A fresh guardian gets it, once (in scope mode not
		// after go: a scope is not made twice, that error is returned and the caller
		// releases the slot).
		res, err = p.rerun(ctx, spec, line)
	}
	if fg {
		// Also after an exec failure: the child took the terminal before its execve failed.
		_ = reclaimForeground(spec.Stdin)
	}
	return res, err
}

// rerun runs spec, whose spec line is line, with a fresh guardian in place of p's (D7b), in
// direct mode.
func (p *prepared) rerun(ctx context.Context, spec Spec, line []byte) (Result, error) {
	if err := p.replace(); err != nil {
		return Result{}, fmt.Errorf("%s: not started: %w", spec.Path, err)
	}
	if err := p.load(ctx, spec.Warn, line); err != nil {
		_ = p.g.close()
		return Result{}, fmt.Errorf("%s: not started: %w", spec.Path, err)
	}
	if spec.Warn != nil {
		spec.Warn("the guardian did not get ready for the command, or did not start it, in time (hung or stopped): replaced by a fresh one")
	}
	r := &runner{spec: spec, g: p.g, mode: newRunMode(spec)}
	return r.run(ctx)
}

// Close ends the prepared guardian and waits for it to exit: before Run, the guardian is
// killed (it has started nothing); after Run, it is already exiting or gone, and Close only
// joins it and the goroutines prepare started. It blocks for as long as the guardian takes to
// exit (milliseconds). Calling it more than once is harmless.
func (p *prepared) close() {
	_ = p.g.close()
	p.abandonScope()
}

// check validates what Run needs before anything starts.
func (s Spec) check() error {
	if s.Path == "" {
		return fmt.Errorf("%w: empty path", ErrNotFound)
	}
	if s.scope != nil && (s.scope.Conn == nil || s.scope.Name == "") {
		return fmt.Errorf("%s: not started: %w: no connection or no unit name", s.Path, ErrScopeFailed)
	}
	return nil
}
