package sema

// SetLegacyWatch makes s watch as D1 first said (from the ranking read's
// revision + 1) instead of D1a's watches served at once, so benchmarks in
// package sema_test can compare both in one run.
func SetLegacyWatch(s *Semaphore, on bool) { s.legacyWatch = on }

// SetLegacyHold makes a promoted waiter of s rewrite its key as HELD before
// Acquire returns, as before the hand-off path was shortened.
func SetLegacyHold(s *Semaphore, on bool) { s.legacyHold = on }
