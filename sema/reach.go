// A waiter whose etcd does not answer says so (D7g).

package sema

import (
	"sync"
	"time"
)

// unreachableAfter is how long a waiting lease's keep-alives go unanswered before its waiter
// reports etcd unreachable (Event.Unreachable): one failed try is not yet an outage.
const unreachableAfter = time.Second

// waitReport is the Waiting event a waiter stands on while it waits (between the event and
// the end of its wait step), so that its lease's keep-alive goroutine can say, in the same
// words, that etcd stopped or started answering again. Every event goes out under mu
// (Semaphore.emit), so Options.OnEvent is never called by two goroutines at once, and none
// from the lease's goroutine once the wait step is over.
type waitReport struct {
	mu sync.Mutex
	ev *Event // nil: not waiting
}

// emitWaiting emits e, a Waiting event, and stands on it until doneWaiting.
func (s *Semaphore) emitWaiting(e Event) {
	s.wr.mu.Lock()
	defer s.wr.mu.Unlock()
	s.wr.ev = &e
	s.emitLocked(e)
}

// doneWaiting ends the wait step that emitWaiting began: the lease says nothing more.
func (s *Semaphore) doneWaiting() {
	s.wr.mu.Lock()
	s.wr.ev = nil
	s.wr.mu.Unlock()
}

// reach is the lease's report that etcd stopped (down) or started again answering its
// keep-alives: the Waiting event the waiter stands on, again, with Unreachable set so.
func (s *Semaphore) reach(down bool) {
	s.wr.mu.Lock()
	defer s.wr.mu.Unlock()
	if s.wr.ev == nil || s.wr.ev.Unreachable == down {
		return
	}
	s.wr.ev.Unreachable = down
	s.emitLocked(*s.wr.ev)
}

// setOnReach sets the function the lease tells when its keep-alives stop being answered
// for unreachableAfter, and when they are answered again (Semaphore.reach).
func (l *lease) setOnReach(fn func(down bool)) {
	l.mu.Lock()
	l.onReach = fn
	l.mu.Unlock()
}

// unreachable reports whether onReach was last told that etcd does not answer.
func (l *lease) unreachable() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.down
}

// tellReach tells onReach, on the lease's goroutine, when etcd has answered none of the
// keep-alives sent for unreachableAfter (ka failing all along), and when it answers again.
func (l *lease) tellReach(ka *kaStream) {
	l.mu.Lock()
	switch {
	case !ka.failing:
		l.failSince = time.Time{}
	case l.failSince.IsZero():
		l.failSince = time.Now()
	}
	down := ka.failing && time.Since(l.failSince) >= unreachableAfter
	fn, changed := l.onReach, down != l.down
	l.down = down
	l.mu.Unlock()
	if fn != nil && changed {
		fn(down)
	}
}
