package slotrun

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/unitrun"
)

// sig is a cause that carries a signal, as a caller's signal context gives it.
type sig syscall.Signal

func (s sig) Error() string             { return "signal" }
func (s sig) Signal() syscall.Signal    { return syscall.Signal(s) }
func started(status int) unitrun.Result { return unitrun.Result{Started: true, ExitStatus: status} }

// Decide over how the child ended and why it was asked to stop (D3, D7, D7b, D18).
func TestDecide(t *testing.T) {
	lost := fmt.Errorf("%w: k", sema.ErrLeaseLost)
	late := fmt.Errorf("%w; %w: k", sema.ErrFenced, sema.ErrDeadlinePassed)
	gone := fmt.Errorf("%w: %w: k", sema.ErrLeaseLost, sema.ErrStateLost)
	goneLate := fmt.Errorf("%w; %w", gone, sema.ErrDeadlinePassed)
	stopped := unitrun.Result{Started: true, ExitStatus: 143, Signal: syscall.SIGTERM, Stopped: true}
	for _, tc := range []struct {
		name string
		h    Holding
		end  End
		sig  syscall.Signal
		term bool
	}{
		{"exit 3", Holding{Result: started(3)}, Ran, 0, false},
		{"ended as the signal came", Holding{Result: started(0), Cause: sig(syscall.SIGTERM)}, Ran, syscall.SIGTERM, false},
		{"lost before start", Holding{Cause: lost}, Requeue, 0, false},
		{"not found, lost too", Holding{RunErr: unitrun.ErrNotFound, Cause: lost}, NotStarted, 0, false},
		{"not started: signal", Holding{RunErr: errors.New("x"), Cause: sig(syscall.SIGINT)}, NotStarted, syscall.SIGINT, false},
		{"stopped for a signal", Holding{Result: stopped, Cause: sig(syscall.SIGTERM)}, Signalled, syscall.SIGTERM, false},
		{"fenced by the guardian", Holding{Result: unitrun.Result{Started: true, Fenced: true}}, Fenced, 0, false},
		{"lost late", Holding{Result: stopped, Cause: late}, LostLate, 0, false},
		{"etcd lost its state (D18)", Holding{Result: stopped, Cause: gone}, StateLost, 0, false},
		{"etcd lost its state, found late", Holding{Result: stopped, Cause: goneLate}, StateLost, 0, false},
		{"etcd lost its state before the start", Holding{Cause: gone}, Requeue, 0, false},
		{"lost", Holding{Result: stopped, Cause: lost}, Lost, 0, false},
		{"run-time limit", Holding{Result: unitrun.Result{Started: true, RuntimeExceeded: true}}, RuntimeExceeded, 0, false},
		{"Ctrl-C in the terminal", Holding{Result: unitrun.Result{Started: true, ExitStatus: 130, Signal: syscall.SIGINT}, Terminal: true}, Ran, syscall.SIGINT, true},
		{"SIGINT without the terminal", Holding{Result: unitrun.Result{Started: true, ExitStatus: 130, Signal: syscall.SIGINT}}, Ran, 0, false},
	} {
		o := Decide(tc.h)
		if o.End != tc.end || o.Signal != tc.sig || o.FromTerminal != tc.term {
			t.Errorf("%s: end %d signal %v terminal %v, want %d %v %v", tc.name, o.End, o.Signal, o.FromTerminal, tc.end, tc.sig, tc.term)
		}
	}
}
