package unitrun

import (
	"bytes"
	"context"
	"fmt"
)

// preload sends the prepared guardian the command's spec ahead of Run, so that the guardian
// decodes it and is ready while the caller still waits for its slot; Run, given a spec that
// comes out the same (the same command, environment, directory, stop signal, grace, scope and
// terminal foreground), then only tells the guardian to go: the hand-off's critical path is one
// control word and the fork. spec is the whole Spec, as Run will get it; its Guardian,
// Stdin, Stdout and Stderr must be prepare's.
//
// It first makes sure the guardian is of this build (D7a), which may wait for its hello (at
// most helloTimeout from its start, or until ctx ends) or replace it by this program
// re-executed. Nothing is started: the guardian waits for Run's go, and exits on Close as
// before. If Run's spec turns out different (another fencing token after a re-entry, the
// terminal's foreground changed), Run gives it to a fresh guardian instead.
//
// In scope mode (spec.scope) without a run-time limit, preload then also waits for the
// guardian's ready and creates the scope with the guardian in it (D8b), described as waiting
// for the slot; Run only says go, and the scope gets its holder's Description once the command
// runs. Close (or a Run with another spec) stops that scope and waits until it is gone. It
// blocks for the scope's creation (ctx and scopeSpec.Timeout bound it); if that fails, the
// guardian is replaced by a fresh one and Run creates the scope itself.
//
// Errors: spec's own error (as Run would return it, see Spec), or one wrapping ErrGuardian
// when the guardian was already used, closed or preloaded, was prepared with other Guardian or
// stdio, or cannot be sent the spec. After an error Run still works: it starts afresh.
func (p *prepared) preload(ctx context.Context, spec Spec) error {
	if p.used || p.g.closed || p.sent {
		return fmt.Errorf("%s: %w: prepared guardian already used or preloaded", spec.Path, ErrGuardian)
	}
	if err := spec.check(); err != nil {
		return err
	}
	spec = spec.withDefaults()
	if !p.start.sameStart(spec) {
		return fmt.Errorf("%s: %w: guardian prepared with another Guardian, Stdin, Stdout or Stderr", spec.Path, ErrGuardian)
	}
	line, err := specLine(spec, inForeground(spec.Stdin), newRunMode(spec).wire())
	if err != nil {
		return err
	}
	if err := p.load(ctx, spec.Warn, line); err != nil {
		return err
	}
	p.loaded = line
	if prepareAhead(spec) {
		if err := p.prepareScope(ctx, spec); err != nil {
			_ = p.replace() // Run starts afresh with a guardian in no scope
			return preparedError(spec.Path, err)
		}
	}
	return nil
}

// load makes p.g a trusted guardian (D7a) that has been sent line: the one preload sent
// exactly line to, else the prepared guardian if it has had no spec yet, else (another spec was
// sent, or the guardian died while it waited: OOM killer, operator) a fresh one. warn is
// Spec.Warn. Errors wrap ErrGuardian, or are ctx's cause.
func (p *prepared) load(ctx context.Context, warn func(string), line []byte) error {
	dead := p.g.gone()
	if p.loaded != nil && !dead && bytes.Equal(p.loaded, line) {
		return nil
	}
	if p.sent || dead {
		if err := p.replace(); err != nil {
			return err
		}
	}
	if err := p.trust(ctx, warn); err != nil {
		return err
	}
	p.sent = true
	return p.g.sendSpec(line)
}

// replace closes p's guardian and starts a fresh one of the same program (p.guardian), which
// has had no spec and is not yet trusted. Errors wrap ErrGuardian.
func (p *prepared) replace() error {
	_ = p.g.close()
	p.abandonScope()
	g, err := p.startGuardian()
	if err != nil {
		return err
	}
	p.g, p.trusted, p.sent, p.loaded = g, false, false, nil
	return nil
}
