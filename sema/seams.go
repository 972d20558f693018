package sema

// seams are the points where a test looks into the recipe or turns a check off, to show
// what it is for. Production leaves Semaphore.seams nil, and every method of a nil *seams
// is the production behaviour: a test's wish costs the production path one nil check.
type seams struct {
	// noProbe: the head of the queue and a holder do not check that their watch's stream
	// still answers, and a release's first revoke may take releaseTimeout (D7b (3) off).
	noProbe bool
	// followArmed, if set, is called when the head's pause watch covers every revision
	// after its ranking read (D16b), so a test knows which path a promotion takes.
	followArmed func()
	// keyWatched, if set, is called each time a holder makes a watch of its key, so a
	// test can count them.
	keyWatched func()
	// enqueueAnswered, if set, is called with our key after the enqueue's Txn
	// committed and before its answer is used: an error from it stands for an
	// answer lost on the way back (the key is written all the same).
	enqueueAnswered func(key string) error
	// readBack, if set, is called with our key when the read after a lost enqueue answer
	// found it absent, before the enqueue is written again: a test writes it there, as a
	// lost Txn that commits late does.
	readBack func(key string)
}

// probing reports whether watch streams are checked (D7b (3)): always in production.
func (t *seams) probing() bool { return t == nil || !t.noProbe }

// armed tells a test the head's pause follow is armed (D16b).
func (t *seams) armed() {
	if t != nil && t.followArmed != nil {
		t.followArmed()
	}
}

// watchedKey tells a test a holder made a watch of its key.
func (t *seams) watchedKey() {
	if t != nil && t.keyWatched != nil {
		t.keyWatched()
	}
}

// answered lets a test lose the answer of an enqueue that committed.
func (t *seams) answered(key string) error {
	if t != nil && t.enqueueAnswered != nil {
		return t.enqueueAnswered(key)
	}
	return nil
}

// readBackEmpty tells a test the read after a lost enqueue answer found no key.
func (t *seams) readBackEmpty(key string) {
	if t != nil && t.readBack != nil {
		t.readBack(key)
	}
}
