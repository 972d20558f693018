package slotrun

import (
	"context"
	"errors"
	"fmt"

	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/unitrun"
)

// noGraceWhenLate returns the context unitrun runs the child under: it ends when runCtx ends,
// with runCtx's cause, wrapped with unitrun.ErrNoGrace when the slot was found lost only after
// the lease's deadline had passed (sema.ErrDeadlinePassed: the process was stopped, frozen or
// starved), or when etcd lost or rewound its state (sema.ErrStateLost, D18): another holder
// may run already, so the child's tree gets SIGKILL at once, without the stop grace (D7b). The CancelFunc must be called once the child's run is over.
func noGraceWhenLate(runCtx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(runCtx))
	stop := context.AfterFunc(runCtx, func() {
		cause := context.Cause(runCtx)
		if errors.Is(cause, sema.ErrDeadlinePassed) || errors.Is(cause, sema.ErrStateLost) { // D7b (1), D18
			cause = fmt.Errorf("%w: %w", unitrun.ErrNoGrace, cause)
		}
		cancel(cause)
	})
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}
