package unitrun

// This file runs in the caller's process (conch): a scope prepared ahead of the slot (D8b),
// for the guardian that prepared.preload gave its spec.

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
)

// relabelTimeout bounds the D-Bus call that gives a prepared scope its holder's Description
// once the command has started: cosmetic, so it is never waited for long.
const relabelTimeout = 2 * time.Second

// prepareAhead reports whether the scope of spec (scope mode) may be created before the slot
// is held (D8b): not when a run-time limit is set, since the scope's RuntimeMaxSec counts from
// the scope's start and systemd cannot set it later.
func prepareAhead(spec Spec) bool {
	return spec.scope != nil && spec.stop.RuntimeMax == 0
}

// waitingDescription is a prepared scope's Description (D8b): it names the semaphore and the
// revision as the holder's does, and says that nothing runs in it yet.
func waitingDescription(holder string) string {
	return holder + ": waiting for the slot, nothing started"
}

// prepareScope waits for the guardian's ready (it has the spec already) and creates the scope
// of spec with the guardian in it, described as waiting (D8b), so that Run only has to say go.
// ctx and the scope's Timeout bound it (the wait for ready also helloTimeout). On success p.scope is set; on error the guardian may be
// in a scope of that name or not, and the caller discards it (prepared.discard).
func (p *prepared) prepareScope(ctx context.Context, spec Spec) error {
	r := &runner{spec: spec, g: p.g}
	rctx, cancel := context.WithTimeout(ctx, helloTimeout) // a stopped guardian must not hang the caller
	defer cancel()
	if err := r.awaitReady(rctx); err != nil {
		return err
	}
	sc := newRunMode(spec).(*scopeRun)
	sc.waiting = true
	if err := sc.start(ctx, spec, p.g.pid); err != nil {
		return err
	}
	sc.prepared, sc.waiting = true, false
	p.scope = sc
	return nil
}

// takeScope returns the prepared scope for Run's spec, with Run's connection, or nil when
// there is none or it was made for another scope (then the guardian is discarded, scope and
// all, and Run starts afresh). Called before prepared.load.
func (p *prepared) takeScope(spec Spec) error {
	if p.scope == nil {
		return nil
	}
	if spec.scope == nil || !sameScope(p.scope.scopeSpec, *spec.scope) {
		return p.replace()
	}
	return nil
}

// sameScope reports whether a and b ask for the same scope, whatever connection they use.
func sameScope(a, b scopeSpec) bool {
	a.Conn, b.Conn = nil, nil
	a.Timeout, b.Timeout = cmp.Or(max(a.Timeout, 0), defaultScopeTimeout), cmp.Or(max(b.Timeout, 0), defaultScopeTimeout)
	return reflect.DeepEqual(a, b)
}

// abandonScope removes the scope prepared for p's guardian, which has exited (g.close
// returned), so that a waiter that leaves the queue or is given another key leaves no scope
// behind (D8b): the scope is empty, and StopScope returns once systemd has collected it. It
// waits for a relabel in progress too.
func (p *prepared) abandonScope() {
	sc := p.scope
	if sc == nil {
		return
	}
	p.scope = nil
	sc.joinRelabel()
	if !p.used {
		_ = sc.stopNow()
	}
}

// relabel gives a prepared scope its holder's Description once the command runs (D8b), on a
// goroutine of its own bounded by relabelTimeout; joinRelabel waits for it. A scope that is
// gone already (a short command) is no error: nothing is reported either way.
func (sc *scopeRun) relabel() {
	if !sc.prepared || sc.relabeled != nil {
		return
	}
	sc.relabeled = make(chan struct{})
	go func() {
		defer close(sc.relabeled)
		ctx, cancel := context.WithTimeout(context.Background(), relabelTimeout)
		defer cancel()
		_ = sc.Conn.SetUnitPropertiesContext(ctx, sc.Name, true, sdbus.PropDescription(sc.Description))
	}()
}

// joinRelabel waits for relabel's goroutine, if one was started.
func (sc *scopeRun) joinRelabel() {
	if sc.relabeled != nil {
		<-sc.relabeled
	}
}

// description is the Description the scope is created with.
func (sc *scopeRun) description() string {
	if sc.waiting {
		return waitingDescription(sc.Description)
	}
	return sc.Description
}

// preparedError is preload's error when the scope could not be prepared.
func preparedError(path string, err error) error {
	return fmt.Errorf("%s: scope not prepared ahead: %w", path, err)
}
