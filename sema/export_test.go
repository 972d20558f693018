package sema

// seamsOf returns the test seams of s, made on first use (production has none).
func seamsOf(s *Semaphore) *seams {
	if s.seams == nil {
		s.seams = &seams{}
	}
	return s.seams
}

// SetNoProbe turns off the liveness check of the head of the queue's watch (D7b (3)), so a
// test can show what it is for.
func SetNoProbe(s *Semaphore, on bool) { seamsOf(s).noProbe = on }

// SetFollowArmed has f called each time the head of the queue of s follows the pause on its
// stream from its ranking read on (D16b).
func SetFollowArmed(s *Semaphore, f func()) { seamsOf(s).followArmed = f }

// SetKeyWatched has f called each time a holder of s makes a watch of its key (a first one,
// or one made again).
func SetKeyWatched(s *Semaphore, f func()) { seamsOf(s).keyWatched = f }

// SetEnqueueAnswered has f called with our key after each enqueue of s committed; an error
// from f stands for the answer lost on the way back.
func SetEnqueueAnswered(s *Semaphore, f func(key string) error) { seamsOf(s).enqueueAnswered = f }

// SetReadBack has f called with our key when the read after a lost enqueue answer found it
// absent, before the enqueue is written again.
func SetReadBack(s *Semaphore, f func(key string)) { seamsOf(s).readBack = f }
