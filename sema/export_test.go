package sema

// SetLegacyWatch makes s watch as D1 first said (from the ranking read's
// revision + 1) instead of D1a's watches served at once, so benchmarks in
// package sema_test can compare both in one run.
func SetLegacyWatch(s *Semaphore, on bool) { s.legacyWatch = on }

// SetLegacyHold makes a promoted waiter of s rewrite its key as HELD before
// Acquire returns, as before the hand-off path was shortened.
func SetLegacyHold(s *Semaphore, on bool) { s.legacyHold = on }

// SetNoProbe turns off the liveness check of the head of the queue's watch (D7b (3)), so a
// test can show what it is for.
func SetNoProbe(s *Semaphore, on bool) { s.noProbe = on }

// SetLegacyPause makes the head of the queue of s read the pause before a promotion, as D16
// first did, instead of following it on its watch stream (D16b), for same-run A/B benchmarks.
func SetLegacyPause(s *Semaphore, on bool) { s.legacyPause = on }

// SetFollowArmed has f called each time the head of the queue of s follows the pause on its
// stream from its ranking read on (D16b).
func SetFollowArmed(s *Semaphore, f func()) { s.followArmed = f }

// SetKeyWatched has f called each time a holder of s makes a watch of its key (a first one,
// or one made again).
func SetKeyWatched(s *Semaphore, f func()) { s.keyWatched = f }
